"""loadstage's Locust extension, loaded beside every scenario (built-in or custom) from
injectors/loadstage_results.py, which imports it.

- Adds the stage options: --wait-min/--wait-max (used by any user class that does not set its
  own wait_time), --pacing, --summary-file, --artifact-file, --progress-file, --target-metrics
  and --stage-seconds.
- Every injector records every request into HDR histograms per method and name
  (loadstage.locust.recorder); each worker report carries them, and the injector's peak CPU, to
  the master, which merges them exactly; each second's requests make a row of the time series.
- With --pacing, every user starts a task on a fixed schedule (an open model). A request's time
  from its task's intended start is recorded beside its response time, so the queueing that a
  closed model hides (coordinated omission) shows.
- With --arrival-rate R, the injectors start R tasks a second in all, on schedule (loadstage.locust.arrivals),
  each on a free user of the injector's pool (--users); an arrival that finds none is dropped and counted. The
  load, and the stage's clock, begin once every pool is up (Locust's spawning_complete, on the master): the master
  gives its workers that instant, and each makes its share of the stage's arrivals from it, rate x seconds in all.
- When the stage ends (or Locust quits), the master (or a standalone runner) writes the stage's headline to
  --summary-file and its artifact (every histogram, endpoint and error row, the time series) to
  --artifact-file; `-` prints the artifact as one line on stdout, for a pod's log.
- While the stage runs the master rewrites --progress-file every second (loadstage.locust.live), and once
  more with the final counts when it ends. With --metrics-port it serves the same as Prometheus series.
- With --target-metrics, the master reads the target's own request count (--target-counter) from every
  instance's metrics when the stage starts and when it ends (servedRequests).
- With --stage-seconds, the master ends the stage itself: it asks every worker to stop its users
  (letting requests in flight finish) and send its last report at once, waits for each worker's
  acknowledgement, which comes after that report (at most one report interval, should a worker be
  gone), then quits. (Locust's own --run-time quits at once, dropping samples still in flight.)
- With --stage-requests N, the stage ends once N requests in all have completed (like ab -n): each worker
  sends exactly its share (loadstage.locust.request_gate) and tells the master when its share is in;
  --stage-seconds is then the stage's time limit. --keep-alive 0 closes the connection after every request.
- --injector-bound-percent: the injector CPU above which a stage measured its injectors, not the target.
- With --slo, the master looks at the stage's intervals on a fixed schedule (loadstage.results.sequential) and
  ends it once its verdict is decided (not before --decide-min), or at once when it breaks an objective by far;
  the headline says how it ended (endedBy: Decided, Breached or MaxDuration) after how many looks, and the
  deciding look's objectives (decision), which are the stage's verdict.
- With --start-file, the master (or a standalone runner) waits for that file before it starts the
  test; its workers can connect meanwhile. A stage's processes can so be started while the previous
  stage is still ending, and its load begins the moment the file appears.
"""


import os
import time

import gevent
from locust import User, events

from loadstage.locust import compat, summary
from loadstage.locust.arrivals import ARRIVALS_DUE_SECONDS, Arrivals
from loadstage.locust.injector_cpu import CPU_LAST_SAMPLE_SECONDS, CpuSampler
from loadstage.locust.looks import decide
from loadstage.locust.recorder import REPORT_KEY, WINDOW_SECONDS, WINDOW_SETTLE_SECONDS, StageRecorder
from loadstage.locust.request_gate import RequestGate, install
from loadstage.locust.served_count import REQUEST_METRIC, scrape_served_requests
from loadstage.locust.stage_output import note_arrivals, report_progress, serve_metrics, target_metrics, write_results
from loadstage.locust.user_timing import first_on_arrival, wait_time_of, with_intended_start


@events.init_command_line_parser.add_listener
def _add_options(parser):
    def option(name, help, **kwargs):
        parser.add_argument(name, include_in_web_ui=False, help=f"loadstage: {help}", **kwargs)
    option("--wait-min", "shortest wait between a user's tasks, seconds", type=float, default=1.0)
    option("--wait-max", "longest wait between a user's tasks, seconds", type=float, default=2.0)
    option("--pacing", "start every user's tasks on this fixed schedule, seconds (0: wait between tasks)",
           type=float, default=0.0)
    option("--arrival-rate", "start this many tasks a second across the injectors, on free users (0: none)",
           type=float, default=0.0)
    option("--summary-file", "where the master writes the stage's headline (JSON)", default="")
    option("--artifact-file", "where the master writes the stage's histograms and rows (JSON; - for stdout)",
           default="")
    option("--progress-file", "where the master writes progress every second", default="")
    option("--target-counter", "the Prometheus counter (or histogram) of the requests the target served",
           default=REQUEST_METRIC)
    option("--target-metrics", "comma-separated /metrics URLs of the target; a host with several addresses "
                               "(a headless Service) means every address", default="")
    option("--stage-seconds", "stop the users after this long, collect the last reports, quit", type=float,
           default=0)
    option("--start-file", "wait until this file exists before starting the test", default="")
    option("--stage-requests", "end the stage once this many requests in all have completed (0: by time)",
           type=int, default=0)
    option("--keep-alive", "1: reuse connections; 0: a new connection for every request", type=int, default=1)
    option("--metrics-port", "serve the stage's live Prometheus series on this port (0: none)", type=int, default=0)
    option("--metrics-address", "the address --metrics-port listens on", default="127.0.0.1")
    option("--metrics-labels", "the labels of every series, as a JSON object", default="")
    option("--injector-bound-percent", "injector CPU above which the stage measured its injectors", type=float,
           default=summary.INJECTOR_BOUND_PERCENT)
    option("--slo", "end the stage once its verdict by these objectives is decided (JSON; seconds, fractions)",
           default="")
    option("--decide-min", "with --slo: no stage ends as decided before this many seconds", type=float, default=0)


def _settle_windows(environment):
    recorder = environment.loadstage
    while True:
        gevent.sleep(WINDOW_SECONDS)
        if not compat.is_master(environment.runner):
            recorder.keep_unsent()
        recorder.close_windows(time.time() - WINDOW_SETTLE_SECONDS)


def _set_up(environment):
    """What a process needs before its first user starts, once, from whichever of init and test_start fires first:
    Locust's main() fires init only once a worker has connected, and the worker's message loop, which runs
    meanwhile, may already have handled its master's spawn and fired test_start (environment.runner is then
    still None: compat.runner_of finds it)."""
    if getattr(environment, "loadstage_set_up", False):
        return
    environment.loadstage_set_up = True
    runner = compat.runner_of(environment)
    for user_class in environment.user_classes:
        own = None if user_class.wait_time is User.wait_time else user_class.wait_time
        user_class.wait_time = wait_time_of(own)
    environment.loadstage = StageRecorder()
    if environment.parsed_options is None:
        return
    if not compat.is_master(runner):
        environment.events.request.add_listener(environment.loadstage.on_request)
        environment.events.user_error.add_listener(environment.loadstage.on_user_error)
        environment.loadstage_cpu = CpuSampler(environment.loadstage)
        gevent.spawn(environment.loadstage_cpu.run)
        environment.loadstage_gate = RequestGate()
    if compat.is_worker(runner):
        environment.events.report_to_master.add_listener(lambda client_id, data: _report(environment, data))
        runner.register_message(FLUSH, _flush_worker)
        runner.register_message(BEGIN, lambda environment, msg, **_: _start_arrivals(environment, msg.data))


def _report(environment, data):
    note_arrivals(environment)
    data[REPORT_KEY] = environment.loadstage.report()


@events.init.add_listener
def _on_init(environment, **_kwargs):
    _set_up(environment)
    options = environment.parsed_options
    if options is None or compat.is_worker(environment.runner):
        return
    if compat.is_master(environment.runner):
        environment.events.worker_report.add_listener(
            lambda client_id, data: environment.loadstage.merge_report(data.get(REPORT_KEY, {}), worker=client_id))
        environment.loadstage_flushed = set()
        environment.runner.register_message(
            FLUSHED, lambda environment, msg, **_: environment.loadstage_flushed.add(msg.node_id))
        environment.loadstage_done = set()
        environment.runner.register_message(DONE, _worker_done)
    if options.progress_file:
        gevent.spawn(report_progress, environment, options.progress_file)
    if options.metrics_port and not compat.is_worker(environment.runner):
        serve_metrics(environment, options)
    if options.start_file:
        _wait_for_start_file(environment, options.start_file)   # before Locust waits for its workers and starts


BEGIN = "loadstage_begin"          # master -> worker: the load began at this instant (epoch seconds)
FLUSH = "loadstage_flush"          # master -> worker: stop your users, report now, then acknowledge
FLUSHED = "loadstage_flushed"      # worker -> master: my last report is in (it was sent before this)
DONE = "loadstage_done"            # worker -> master: my share of --stage-requests has completed
FLUSH_TIMEOUT_SECONDS = compat.REPORT_INTERVAL_SECONDS + 1


def _worker_done(environment, msg, **_kwargs):
    environment.loadstage_done.add(msg.node_id)
    if compat.worker_ids(environment.runner) <= environment.loadstage_done:
        gevent.spawn(_end_stage, environment, 0)


def _share_done(environment):
    if compat.is_worker(environment.runner):
        environment.runner.send_message(DONE)
    else:
        gevent.spawn(_end_stage, environment, 0)


def _start_arrivals(environment, began):
    if (arrivals := getattr(environment, "loadstage_arrivals", None)) is not None:
        arrivals.start(began, environment.parsed_options.stage_seconds)


def _stop_arrivals(environment):
    if (arrivals := getattr(environment, "loadstage_arrivals", None)) is not None:
        arrivals.finish(ARRIVALS_DUE_SECONDS)


def _flush_worker(environment, msg, **_kwargs):
    runner = environment.runner
    _stop_arrivals(environment)   # before the users stop: an arrival then would find none free
    runner.stop()          # users finish the request in flight (--stop-timeout), then stop
    environment.loadstage_cpu.sample(CPU_LAST_SAMPLE_SECONDS)
    compat.report_now(runner)
    runner.send_message(FLUSHED)


def _end_stage(environment, seconds):
    gevent.sleep(seconds)
    if getattr(environment, "loadstage_ending", False):   # by its requests, then by its time limit
        return
    environment.loadstage_ending = True
    runner = environment.runner
    if compat.is_master(runner):
        expected = compat.worker_ids(runner)
        flushed = environment.loadstage_flushed
        runner.send_message(FLUSH)
        deadline = time.monotonic() + FLUSH_TIMEOUT_SECONDS
        while not expected <= flushed and time.monotonic() < deadline:
            gevent.sleep(0.02)
    else:
        _stop_arrivals(environment)
        runner.stop()
        environment.loadstage_cpu.sample(CPU_LAST_SAMPLE_SECONDS)
    write_results(environment)   # every sample is in: the stage's results need not wait for Locust to quit
    runner.quit()


def _wait_for_start_file(environment, path):
    """Until the file exists; then, on a master, until its workers are in (Locust's own wait polls once a
    second), for at most --expect-workers-max-wait, after which Locust's wait gives up as it would."""
    while not os.path.exists(path):
        gevent.sleep(0.02)
    runner, options = environment.runner, environment.parsed_options
    if compat.is_master(runner):
        deadline = time.monotonic() + (options.expect_workers_max_wait or 0)
        while compat.ready_workers(runner) < options.expect_workers and time.monotonic() < deadline:
            gevent.sleep(0.02)


def _before_users(environment, options):
    """What a stage's options ask of every request, installed before the first user starts, and only where
    asked: each wrapper costs every request some microseconds (BENCHMARKS.md (b))."""
    gate = environment.loadstage_gate
    gate.on_done = lambda: _share_done(environment)
    gate.configure(goal=options.stage_requests, injectors=options.expect_workers or 1,
                   index=compat.worker_index(compat.runner_of(environment)), keep_alive=bool(options.keep_alive))
    if gate.needed:
        install(compat.http_sessions(), gate)
        environment.events.request.add_listener(gate.note_completed)
    if options.arrival_rate:
        arrivals = environment.loadstage_arrivals = Arrivals(
            options.arrival_rate, options.expect_workers or 1, compat.worker_index(compat.runner_of(environment)))
        environment.events.test_stopping.add_listener(lambda **_: arrivals.stop())   # whatever stops the users
        for user_class in environment.user_classes:
            user_class.on_start = first_on_arrival(user_class.on_start)
    if options.pacing or options.arrival_rate:
        for user_class in environment.user_classes:
            user_class.context = with_intended_start(user_class.context)


@events.test_start.add_listener
def _on_test_start(environment, **_kwargs):
    _set_up(environment)
    options = environment.parsed_options
    if options is None:
        return
    runner = compat.runner_of(environment)
    if not compat.is_master(runner):   # a worker has the master's options by now
        _before_users(environment, options)
    if compat.is_worker(runner):
        return
    environment.loadstage_started = time.time()
    if options.target_metrics:
        # fired before any user is dispatched: nothing of this stage has reached the target yet
        environment.loadstage_served_before = scrape_served_requests(target_metrics(options),
                                                                     options.target_counter)
    gevent.spawn(_settle_windows, environment)
    if options.arrival_rate:   # the arrivals begin once every pool is up
        environment.events.spawning_complete.add_listener(lambda **_: _begin_load(environment, options))
    else:
        _begin_load(environment, options)


def _begin_load(environment, options):
    """The stage's clock starts, once: its end, and its looks."""
    if getattr(environment, "loadstage_began", False):
        return
    environment.loadstage_began = True
    if options.arrival_rate:
        environment.loadstage_started = time.time()
        if compat.is_master(environment.runner):
            environment.runner.send_message(BEGIN, environment.loadstage_started)
        else:
            _start_arrivals(environment, environment.loadstage_started)
    if options.stage_seconds:
        gevent.spawn(_end_stage, environment, options.stage_seconds)
        if options.slo:
            gevent.spawn(decide, environment, options, _end_stage)


@events.quitting.add_listener
def _on_quitting(environment, **_kwargs):
    write_results(environment)
