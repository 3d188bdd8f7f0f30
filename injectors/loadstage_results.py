"""loadstage's Locust extension, loaded beside every scenario (built-in or custom).

- Adds the stage options: --wait-min/--wait-max (used by any user class that
  does not set its own wait_time), --summary-file and --progress-file.
- On the master (or a standalone runner) it writes, when Locust quits, one JSON
  summary of the whole stage computed from the merged stats of all workers.
- While the stage runs it rewrites --progress-file every second with the current
  requests per second and p99.
- With --target-metrics, the master reads the target's own request count from every
  instance's /metrics when the stage starts and when it ends; the summary carries the
  difference as servedRequests.
- With --stage-seconds, the master ends the stage itself: it stops the users, waits
  one worker report interval so that every worker's last samples arrive, then quits.
  (Locust's own --run-time quits at once, dropping samples still in flight.)
"""

import json
import os
import random
import tempfile

import gevent
from locust import User, events
from locust.runners import WORKER_REPORT_INTERVAL, WorkerRunner

from loadstage.server_metrics import scrape_served_requests, served_between
from loadstage.summary import summarize


@events.init_command_line_parser.add_listener
def _add_options(parser):
    parser.add_argument("--wait-min", type=float, default=1.0, include_in_web_ui=False,
                        help="loadstage: shortest wait between a user's tasks, seconds")
    parser.add_argument("--wait-max", type=float, default=2.0, include_in_web_ui=False,
                        help="loadstage: longest wait between a user's tasks, seconds")
    parser.add_argument("--summary-file", default="", include_in_web_ui=False,
                        help="loadstage: where the master writes the stage's JSON summary")
    parser.add_argument("--progress-file", default="", include_in_web_ui=False,
                        help="loadstage: where the master writes progress every second")
    parser.add_argument("--target-metrics", default="", include_in_web_ui=False,
                        help="loadstage: comma-separated /metrics URLs of the target; a host with several "
                             "addresses (a headless Service) means every address")
    parser.add_argument("--stage-seconds", type=float, default=0, include_in_web_ui=False,
                        help="loadstage: stop the users after this long, collect the last reports, quit")


def _wait_from_options(user):
    options = user.environment.parsed_options
    return random.uniform(options.wait_min, options.wait_max)


def _write_atomically(path, payload: bytes):
    """Replaces the file by a rename, except under /dev (e.g. a Kubernetes termination log)."""
    directory = os.path.dirname(os.path.abspath(path))
    if directory == "/dev" or directory.startswith("/dev/"):
        with open(path, "wb") as f:
            f.write(payload)
        return
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".summary-")
    with os.fdopen(fd, "wb") as f:
        f.write(payload)
    os.replace(tmp, path)


def _report_progress(environment, path):
    while True:
        gevent.sleep(1)
        total = environment.stats.total
        runner = environment.runner
        progress = {
            "users": runner.user_count,
            "workers": len(runner.clients) if hasattr(runner, "clients") else 1,
            "requests": total.num_requests,
            "failures": total.num_failures,
            "currentRps": round(total.current_rps or 0.0, 1),
            "currentP99Ms": total.get_current_response_time_percentile(0.99),
        }
        _write_atomically(path, json.dumps(progress).encode())


@events.init.add_listener
def _on_init(environment, **_kwargs):
    for user_class in environment.user_classes:
        if user_class.wait_time is User.wait_time:
            user_class.wait_time = _wait_from_options
    options = environment.parsed_options
    if isinstance(environment.runner, WorkerRunner) or options is None:
        return
    if options.progress_file:
        gevent.spawn(_report_progress, environment, options.progress_file)


def _end_stage(environment, seconds):
    gevent.sleep(seconds)
    environment.runner.stop()
    if not isinstance(environment.runner, WorkerRunner) and hasattr(environment.runner, "clients"):
        gevent.sleep(WORKER_REPORT_INTERVAL + 1)
    environment.runner.quit()


def _target_metrics(options):
    return [url for url in options.target_metrics.split(",") if url]


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs):
    options = environment.parsed_options
    if isinstance(environment.runner, WorkerRunner) or options is None:
        return
    if options.target_metrics:
        # fired before any user is dispatched: nothing of this stage has reached the target yet
        environment.loadstage_served_before = scrape_served_requests(_target_metrics(options))
    if options.stage_seconds:
        gevent.spawn(_end_stage, environment, options.stage_seconds)


@events.quitting.add_listener
def _on_quitting(environment, **_kwargs):
    options = environment.parsed_options
    if isinstance(environment.runner, WorkerRunner) or options is None or not options.summary_file:
        return
    served = None
    if options.target_metrics:
        served = served_between(getattr(environment, "loadstage_served_before", None),
                                scrape_served_requests(_target_metrics(options)))
    workers = getattr(environment.runner, "worker_index_max", None)
    summary = summarize(environment.stats, injectors=workers, served_requests=served)
    _write_atomically(options.summary_file, json.dumps(summary, separators=(",", ":")).encode())
