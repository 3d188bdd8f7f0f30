"""What a stage's master (or standalone runner) writes: its progress every second and its live series, then, once,
the artifact and the headline (whose presence says the stage's results are complete)."""

import json
import os
import sys
import tempfile

import gevent
from gevent.pywsgi import WSGIServer
from prometheus_client import CollectorRegistry, make_wsgi_app

from loadstage.api.wire import headline_json
from loadstage.locust import compat, live, summary
from loadstage.locust.served_count import scrape_served_requests, served_between
from loadstage.results import live_series
from loadstage.results.artifact import artifact_line, encode


def target_metrics(options):
    return [url for url in options.target_metrics.split(",") if url]


def note_arrivals(environment):
    """An injector's arrivals and drops so far, into its recorder."""
    if (arrivals := getattr(environment, "loadstage_arrivals", None)) is not None:
        environment.loadstage.own_arrivals = (arrivals.arrived, arrivals.dropped)


def write_atomically(path, payload: bytes):
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


def report_progress(environment, path):
    while not getattr(environment, "loadstage_written", False):
        gevent.sleep(1)
        if not getattr(environment, "loadstage_written", False):
            write_atomically(path, json.dumps(live.snapshot(environment)).encode())


class LiveCollector:
    """The stage's series, as Prometheus scrapes them from the master."""

    def __init__(self, environment, labels):
        self.environment, self.labels = environment, labels

    def collect(self):
        snapshot = getattr(self.environment, "loadstage_final", None) or live.snapshot(self.environment)
        return live_series.stage_families([(snapshot, self.labels, True)])


def serve_metrics(environment, options):
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LiveCollector(environment, json.loads(options.metrics_labels or "{}")))
    server = WSGIServer((options.metrics_address, options.metrics_port), make_wsgi_app(registry), log=None)
    gevent.spawn(server.serve_forever)


def write_artifact(path, artifact):
    if path == "-":
        sys.stdout.write(artifact_line(artifact) + "\n")
        sys.stdout.flush()
    else:
        write_atomically(path, encode(artifact))


def write_results(environment):
    """The artifact, then the summary (its presence says the stage's results are complete); once."""
    options = environment.parsed_options
    if compat.is_worker(environment.runner) or options is None or not options.summary_file \
            or getattr(environment, "loadstage_written", False):
        return
    environment.loadstage_written = True
    served = None
    if options.target_metrics:
        served = served_between(getattr(environment, "loadstage_served_before", None),
                                scrape_served_requests(target_metrics(options), options.target_counter))
    recorder = environment.loadstage
    if not compat.is_master(environment.runner):
        note_arrivals(environment)
        recorder.keep_unsent()
    recorder.close_windows()
    # the final counts, for a last read of the progress file and a last scrape before the master quits
    environment.loadstage_final = live.snapshot(environment)
    if options.progress_file:
        write_atomically(options.progress_file, json.dumps(environment.loadstage_final).encode())
    workers = compat.workers_seen(environment.runner)
    headline, artifact = summary.figures(environment.stats, recorder, injectors=workers, served_requests=served,
                                         bound_percent=options.injector_bound_percent,
                                         started=environment.loadstage_started if options.arrival_rate else None)
    if options.slo:
        headline["endedBy"] = getattr(environment, "loadstage_ended_by", "MaxDuration")
        headline["looks"] = getattr(environment, "loadstage_looks", 0)
        if hasattr(environment, "loadstage_decision"):
            headline["decision"] = environment.loadstage_decision
    if options.artifact_file:
        write_artifact(options.artifact_file, artifact)
    write_atomically(options.summary_file, headline_json(headline))
