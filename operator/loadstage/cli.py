"""The `loadstage` command."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from . import compare, histograms, report, result_source
from .engine import BlockingBackend, Cancelled, ExperimentFailed, StageEngine, new_status, now
from .local_backend import LocalBackend, Progress, local_problems
from .crd import render_crd
from .manifests import Images
from .model import API_GROUP, API_VERSION, KIND, Experiment, load_experiment_file
from .schema import ValidationError, format_duration, parse_duration

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_THRESHOLDS, EXIT_REGRESSION = 0, 1, 2, 3, 4
REPORT_FORMATS = ("table", "markdown", "csv", "html")
SUFFIX_FORMATS = {".md": "markdown", ".markdown": "markdown", ".csv": "csv", ".html": "html", ".htm": "html",
                  ".txt": "table"}
DEFAULT_IMAGES = Images(runner="loadstage/runner-app:0.1.0", injector="loadstage/injector:0.1.0",
                        redis="redis:7.2-alpine")


def _duration_arg(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a duration such as 10s or 2m, got {text!r}") from None


def _scale_arg(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"must be a number > 0 and <= 100, got {text!r}")
    return value


def _tolerance_arg(text: str) -> float:
    try:
        return compare.parse_tolerance(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loadstage", description="Load-stage experiments for gunicorn apps.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an experiment on this machine with real processes")
    run.add_argument("file", help="LoadExperiment YAML file")
    run.add_argument("-o", "--output", help="write the result (the resource with its status) to this "
                                            ".json or .yaml file, updated after every stage")
    run.add_argument("--stage-duration", type=_duration_arg, metavar="DURATION",
                     help="run every stage for this long instead (e.g. 10s)")
    run.add_argument("--warmup-duration", type=_duration_arg, metavar="DURATION",
                     help="run the warm-up stage for this long instead")
    run.add_argument("--users-scale", type=_scale_arg, metavar="FACTOR",
                     help="multiply users and spawn rate per injector by FACTOR (e.g. 0.1)")
    run.add_argument("--workdir", help="keep logs and per-stage files here (default: a temporary "
                                       "directory, removed after a successful run)")
    run.add_argument("--fail-on-threshold", action="store_true",
                     help=f"exit {EXIT_THRESHOLDS} if any stage failed a threshold")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")

    validate = sub.add_parser("validate", help="check an experiment file and show its plan")
    validate.add_argument("file")

    rep = sub.add_parser("report", help="the results of a run (a result file or lx/NAME in a cluster) as a table, "
                                        "Markdown, CSV or a self-contained HTML page with charts")
    rep.add_argument("source", help="a result file from `loadstage run -o`, or lx/NAME (current kubeconfig)")
    rep.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    rep.add_argument("--format", choices=REPORT_FORMATS,
                     help="table (default), markdown (the seeds' layout), csv (a row per stage and variant) or html "
                          "(one file, charts inline); with -o FILE.md/.csv/.html the suffix picks it")
    rep.add_argument("-o", "--output", help="write to this file instead of standard output")
    rep.add_argument("--follow", action="store_true",
                     help="print the table again whenever a stage finishes, until the run has ended; exits "
                          f"{EXIT_OK} if it Succeeded, {EXIT_FAILED} if it Failed")

    cmp = sub.add_parser("compare", help="the matching stages of two runs side by side; exits "
                                         f"{EXIT_REGRESSION} if one regressed")
    cmp.add_argument("base", help="the run to compare with: a result file or lx/NAME")
    cmp.add_argument("new", help="the run to judge: a result file or lx/NAME")
    cmp.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    cmp.add_argument("--tolerance", default="10%", type=_tolerance_arg,
                     help="how much worse a figure may get before it counts (default 10%%): p99 and p99.9 up, "
                          "throughput down, the error rate up")
    cmp.add_argument("--format", choices=("table", "markdown"), default="table",
                     help="table (default) or markdown (for a pull-request comment)")

    art = sub.add_parser("artifacts", help="write every stage's histograms and rows (a result file or lx/NAME) "
                                           "to a directory")
    art.add_argument("source", help="a result file from `loadstage run -o`, or lx/NAME (current kubeconfig)")
    art.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    art.add_argument("-o", "--output", default="artifacts", help="directory to write to (default: artifacts)")

    sub.add_parser("crd", help="print the LoadExperiment CustomResourceDefinition")

    op = sub.add_parser("operator", help="run the Kopf operator against the current cluster")
    scope = op.add_mutually_exclusive_group(required=True)
    scope.add_argument("-n", "--namespace", action="append", dest="namespaces", metavar="NAMESPACE",
                       help="watch this namespace (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    op.add_argument("--liveness-port", type=int, default=8080,
                    help="serve the liveness probe on http://ADDRESS:PORT/healthz (0: off)")
    op.add_argument("--listen-address", default="0.0.0.0",
                    help="address of the liveness and metrics servers (default 0.0.0.0: every interface of "
                         "the pod; 127.0.0.1 for an operator run on a workstation)")
    op.add_argument("--runner-image", default=os.environ.get("LOADSTAGE_RUNNER_IMAGE", DEFAULT_IMAGES.runner))
    op.add_argument("--injector-image",
                    default=os.environ.get("LOADSTAGE_INJECTOR_IMAGE", DEFAULT_IMAGES.injector))
    op.add_argument("--redis-image", default=os.environ.get("LOADSTAGE_REDIS_IMAGE", DEFAULT_IMAGES.redis))
    op.add_argument("--redis-sample-url", default=os.environ.get("LOADSTAGE_REDIS_SAMPLE_URL"),
                    help="sample Redis connections at this URL instead of the experiment's Redis Service "
                         "(for an operator outside the cluster, e.g. through kubectl port-forward)")
    op.add_argument("--metrics-port", type=int, default=0,
                    help="serve the operator's Prometheus metrics on this port (0: off)")
    op.add_argument("--leader-elect", action="store_true",
                    help="run as one of several replicas: only the holder of a Lease runs experiments, the others "
                         "stand by and take over when it is gone")
    op.add_argument("--leader-elect-namespace", default=os.environ.get("POD_NAMESPACE") or "default",
                    help="namespace of the Lease (default: $POD_NAMESPACE, else default)")
    op.add_argument("--leader-elect-lease", default="loadstage-operator", help="name of the Lease")
    op.add_argument("-v", "--verbose", action="store_true")
    return parser


def _document(experiment: Experiment, status: dict[str, Any],
              artifacts: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """The result file: the resource with its status, and every stage's artifact (its histograms,
    endpoint and error rows, time series) under `artifacts`, as ConfigMaps hold them in a cluster."""
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND,
            "metadata": {"name": experiment.name}, "spec": experiment.source.get("spec", {}),
            "status": status,
            "artifacts": [{"variant": index + 1, "stages": stages} for index, stages in sorted(artifacts.items())]}


def replace_file(path: Path, text: str) -> None:
    """Readers (`report --follow`) see the old file or the new one, never half of it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_result(path: Path, document: dict[str, Any]) -> None:
    replace_file(path, yaml.safe_dump(document, sort_keys=False) if path.suffix in (".yaml", ".yml")
                 else json.dumps(document, indent=2) + "\n")


class ProgressPrinter:
    """One status line on a terminal; otherwise a line every few seconds."""

    def __init__(self, stream=sys.stderr, quiet: bool = False, every: float = 5.0):
        self.stream, self.quiet, self.every = stream, quiet, every
        self.tty = stream.isatty()
        self.last = 0.0

    def __call__(self, p: Progress) -> None:
        if self.quiet:
            return
        line = report.progress_line(p.step.label(), p.elapsed, p.step.stage.duration, p.snapshot)
        if self.tty:
            self.stream.write("\r\033[K" + line)
        elif time.monotonic() - self.last >= self.every:
            self.stream.write(line + "\n")
            self.last = time.monotonic()
        self.stream.flush()

    def say(self, text: str) -> None:
        if self.tty and not self.quiet:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()


def _print_plan(experiment: Experiment, out) -> None:
    spec = experiment.spec
    variants = experiment.variants()
    total = sum(s.duration for s in spec.stages) + (spec.warmup.duration if spec.warmup else 0)
    out.write(f"{experiment.name}: {len(variants)} variant(s) x {len(spec.stages)} stage(s), "
              f"about {format_duration(int(total * len(variants)))} of load\n")
    for v in variants:
        out.write(f"  variant {v.index + 1}: {v.label()}\n")
    for i, s in enumerate(spec.stages, 1):
        users = spec.injectors.users_for(s)
        out.write(f"  stage {i}: {s.injectors} injector(s), {users} users, "
                  f"{format_duration(s.duration)}\n")


def cmd_validate(args) -> int:
    experiment = load_experiment_file(args.file)
    print(f"{args.file}: valid")
    _print_plan(experiment, sys.stdout)
    return EXIT_OK


def cmd_run(args) -> int:
    experiment = load_experiment_file(args.file)
    problems = local_problems(experiment)
    if problems:
        raise ValidationError(problems)
    experiment = experiment.scaled(
        stage_duration=args.stage_duration, warmup_duration=args.warmup_duration,
        users_scale=args.users_scale)
    printer = ProgressPrinter(quiet=args.quiet)
    output = Path(args.output) if args.output else None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"loadstage-{experiment.name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cancel = threading.Event()
    received: list[int] = []

    def on_signal(signum, _frame):
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        cancel.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    status = new_status(experiment)

    def on_update(current: dict[str, Any]) -> None:
        if output:
            write_result(output, _document(experiment, current, engine.artifacts))

    async def on_engine_update(current: dict[str, Any]) -> None:
        on_update(current)

    _print_plan(experiment, sys.stderr)
    printer.say(f"logs: {workdir}")
    backend = LocalBackend(experiment, workdir, on_progress=printer, cancel=cancel)
    engine = StageEngine(experiment, BlockingBackend(backend), on_update=on_engine_update)
    code = EXIT_OK
    try:
        asyncio.run(engine.run(status))
    except (Cancelled, KeyboardInterrupt):
        name = signal.Signals(received[0]).name if received else "SIGINT"
        status.update(phase="Failed", reason="Interrupted", finishedAt=now(),
                      message=f"interrupted by {name}; finished stages are kept")
        code = 128 + (received[0] if received else signal.SIGINT)
    except ExperimentFailed as e:
        status.update(phase="Failed", reason=e.reason, message=e.message, finishedAt=now())
        code = EXIT_FAILED
    finally:
        backend.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    on_update(status)
    printer.say("")
    sys.stdout.write(_table_report(status, with_phase=False))
    if status["phase"] != "Succeeded":
        printer.say(f"{status['phase']}: {status['message']}")
        printer.say(f"logs kept in {workdir}")
    elif not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    if output:
        printer.say(f"result written to {output}")
    if code == EXIT_OK and args.fail_on_threshold and any(
            not s["verdict"]["passed"] for v in status["variants"] for s in v["stages"] if "verdict" in s):
        code = EXIT_THRESHOLDS
    return code


def _table_report(status: dict[str, Any], with_phase: bool = True) -> str:
    lines = []
    if any(v["stages"] for v in status["variants"]):
        lines.append(report.render_report(status))
    lines += report.render_capacity(status) + report.render_cross_check(status)
    if with_phase and status.get("phase") != "Succeeded":
        lines.append(f"{status.get('phase', 'Pending')}: {status.get('message', '')}")
    return "".join(line + "\n" for line in lines)


def _report_format(args) -> str:
    if args.format:
        return args.format
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if args.output and suffix not in SUFFIX_FORMATS:
        raise ValidationError([("--format", f"cannot tell the format from {args.output!r}: give --format, or name "
                                            f"the file .md, .csv, .html or .txt")])
    return SUFFIX_FORMATS.get(suffix, "table")


def render_document(source: str, document: dict[str, Any], form: str, namespace: str | None = None) -> str:
    status = document["status"]
    if form == "table":
        return _table_report(status)
    experiment = result_source.experiment_of(source, document)
    if form == "markdown":
        from .report_markdown import render_markdown
        return render_markdown(experiment, status)
    if form == "csv":
        from .report_csv import render_csv
        return render_csv(experiment, status)
    try:
        from .report_html import render_html
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValidationError([("--format html", "needs matplotlib: pip install 'loadstage[report]'")]) from None
    artifacts = {(v, s): a for v, s, a in result_source.load_artifacts(source, namespace, document)}
    return render_html(experiment, status, artifacts)


def _write(text: str, output: str | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        replace_file(Path(output), text)
    except OSError as e:
        raise ValidationError([("--output", f"cannot write {output}: {e.strerror}")]) from None


def cmd_report(args) -> int:
    form = _report_format(args)
    if args.follow:
        if form != "table" or args.output:
            raise ValidationError([("--follow", "prints the table to the terminal; write the other formats "
                                                "once the run has ended")])
        return _follow(args)
    document = result_source.load_document(args.source, args.namespace)
    _write(render_document(args.source, document, form, args.namespace), args.output)
    if args.output:
        print(f"{form} report written to {args.output}", file=sys.stderr)
    return EXIT_OK


def _follow(args) -> int:
    shown = None
    for document in result_source.follow(args.source, args.namespace):
        status = document.get("status") or {}
        variants = status.get("variants") or []
        finished = sum(len(v.get("stages", [])) for v in variants)
        state = (status.get("phase"), finished)
        if state == shown:
            continue
        shown = state
        total = len(variants) * len(document.get("spec", {}).get("stages", []))
        print(f"== {time.strftime('%H:%M:%S')} {status.get('phase', 'Pending')}: {finished} of {total or '?'} "
              f"stage(s) finished ==")
        if variants:
            sys.stdout.write(_table_report(status))
        sys.stdout.flush()
    return EXIT_OK if shown and shown[0] == "Succeeded" else EXIT_FAILED


def cmd_compare(args) -> int:
    runs = []
    for source in (args.base, args.new):
        document = result_source.load_document(source, args.namespace)
        runs.append((result_source.experiment_of(source, document), document["status"]))
    comparison = compare.compare(runs[0], runs[1], args.tolerance, names=(args.base, args.new))
    sys.stdout.write(compare.render_markdown(comparison) if args.format == "markdown"
                     else compare.render_table(comparison))
    return EXIT_REGRESSION if comparison.regressed else EXIT_OK


def cmd_artifacts(args) -> int:
    """Per stage: the artifact as JSON, and the stage's histogram as an HdrHistogram percentile
    distribution (.hgrm, milliseconds) that HdrHistogram's plotters read."""
    found = result_source.load_artifacts(args.source, args.namespace)
    out = Path(args.output)
    for variant, number, artifact in found:
        directory = out / f"variant-{variant}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"stage-{number}.json").write_text(json.dumps(artifact, indent=1) + "\n")
        histogram = histograms.decode(artifact["histogram"])
        with open(directory / f"stage-{number}.hgrm", "wb") as f:
            histogram.output_percentile_distribution(f, 1e6)
        latency = histograms.latency_ms(histogram)
        print(f"variant {variant} stage {number}: {latency['n']:,} requests, p50 {latency['p50']:.3g} ms, "
              f"p99 {latency['p99']:.3g} ms, p99.9 {latency['p999']:.3g} ms -> {directory}/stage-{number}.json, .hgrm")
    if not found:
        print(f"{args.source}: no stage has finished yet")
    return EXIT_OK


def cmd_crd(_args) -> int:
    sys.stdout.write(render_crd())
    return EXIT_OK


def cmd_operator(args) -> int:
    import logging

    import kopf

    from . import handlers

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = handlers.OperatorConfig(
        images=Images(runner=args.runner_image, injector=args.injector_image, redis=args.redis_image),
        namespaces=tuple(args.namespaces or ()), redis_sample_url=args.redis_sample_url,
        metrics_port=args.metrics_port or None, listen_address=args.listen_address)
    liveness = f"http://{args.listen_address}:{args.liveness_port}/healthz" if args.liveness_port else None
    election = _lead(args) if args.leader_elect else None
    try:
        kopf.run(standalone=True, clusterwide=args.all_namespaces, namespaces=args.namespaces or (),
                 liveness_endpoint=liveness, memo=kopf.Memo(config=config))
    finally:
        if election is not None:
            election.release()
    return EXIT_OK


def _lead(args):
    """Waits, as a standby, until this process holds the Lease; then keeps it, and ends the
    process at once if it is lost, so two operators never act together."""
    import logging

    import kubernetes

    from . import handlers, leader
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()
    election = leader.LeaderElection(handlers.api_client(), args.leader_elect_namespace, args.leader_elect_lease,
                                     leader.identity())
    health = leader.StandbyHealth(args.listen_address, args.liveness_port) if args.liveness_port else None
    logging.getLogger("loadstage.leader").info("standby as %s: waiting for Lease %s/%s", election.holder,
                                               args.leader_elect_namespace, args.leader_elect_lease)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        if not election.acquire(stopped):
            sys.exit(EXIT_OK)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if health is not None:
            health.close()

    def lost(why: str) -> None:
        logging.getLogger("loadstage.leader").critical("lost the Lease (%s): exiting so that the new leader "
                                                       "acts alone", why)
        os._exit(1)
    election.keep(lost)
    logging.getLogger("loadstage.leader").info("leading as %s", election.holder)
    return election


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"run": cmd_run, "validate": cmd_validate, "report": cmd_report, "compare": cmd_compare,
                "artifacts": cmd_artifacts,
                "crd": cmd_crd, "operator": cmd_operator}[args.command](args)
    except ValidationError as e:
        for path, message in e.problems:
            print(f"error: {path}: {message}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:   # Ctrl-C while following a run
        return 128 + signal.SIGINT
    except BrokenPipeError:   # the reader went away (`loadstage report ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
