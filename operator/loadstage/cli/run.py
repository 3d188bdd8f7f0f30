"""`loadstage run` and `loadstage validate`: an experiment on this machine, with real processes."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from loadstage.api.load import load_experiment_file, parse_experiment
from loadstage.api.names import API_GROUP, API_VERSION, KIND
from loadstage.api.quantities import format_duration
from loadstage.api.schema import ValidationError
from loadstage.api.status import RunStatus, VariantRecord, VerificationRecord
from loadstage.api.types import Experiment
from loadstage.cli.history import prepared, record
from loadstage.cli.parser import EXIT_FAILED, EXIT_NOTHING_SUCCEEDED, EXIT_OK, EXIT_THRESHOLDS
from loadstage.cli.plan import print_plan
from loadstage.engine.backend import BlockingBackend
from loadstage.engine.clock import now, parse
from loadstage.engine.errors import Cancelled, ExperimentFailed
from loadstage.engine.stages import StageEngine, new_status
from loadstage.export import verification
from loadstage.export.bundle import scaler_for
from loadstage.export.choice import ExportRefused, choose
from loadstage.local.app_interface import interface_problems
from loadstage.local.backend import LocalBackend, Progress
from loadstage.local.live_metrics import LocalSeries
from loadstage.local.live_metrics import serve as serve_metrics
from loadstage.local.target import local_problems, project_root
from loadstage.reports.terminal import progress_line, render_status


def _document(experiment: Experiment, status: RunStatus,
              artifacts: dict[tuple[int, int, int | None], dict[str, Any]]) -> dict[str, Any]:
    """The result file: the resource with its status, and every stage's artifact (its histograms,
    endpoint and error rows, time series) under `artifacts`, as ConfigMaps hold them in a cluster: one
    entry per variant and repeat ("repeat" from 2 on), its stages in order ({} for one not run yet)."""
    runs = sorted({(v, r) for v, r, _ in artifacts})

    def last(v: int, r: int) -> int:   # a search's stages are as many as it ran
        return len(experiment.spec.stages) or max(n or 0 for run_v, run_r, n in artifacts if (run_v, run_r) == (v, r))
    return {"apiVersion": f"{API_GROUP}/{API_VERSION}", "kind": KIND,
            "metadata": {"name": experiment.name}, "spec": experiment.source.get("spec", {}),
            "status": status.to_status(),
            "artifacts": [{"variant": v + 1, **({"repeat": r} if r > 1 else {}),
                           "stages": [artifacts.get((v, r, n), {}) for n in range(1, last(v, r) + 1)]}
                          for v, r in runs]}


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
        self.eta: dt.datetime | None = None   # the engine's estimate of the run's end

    def note_status(self, status: RunStatus) -> None:
        eta = (status.progress or {}).get("eta")
        self.eta = parse(eta) if eta else None

    def __call__(self, p: Progress) -> None:
        if self.quiet:
            return
        left = (self.eta - dt.datetime.now(dt.UTC)).total_seconds() if self.eta else None
        line = progress_line(p.step.label(), p.elapsed, p.step.stage, p.snapshot, run_left=left)
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


def failed_objective(run: RunStatus, variant: VariantRecord) -> bool:
    """A ladder's stage failed its objective; a search's fails by design, so its variant fails only where it
    failed already at `from` (or its injectors, not the target, ran out); a goal's, only where none passed, or
    its pick, verified (spec.verify), broke it."""
    if run.recommendation is not None:
        return run.recommendation.winner is None or (run.verification or {}).get("result") == "Breaks"
    if variant.search is not None:
        return variant.search.reason in ("FloorFailed", "InjectorBound")
    return any(s.verdict and not s.verdict.passed for s in variant.stages)


def verify_locally(experiment: Experiment, status: RunStatus, workdir: Path, on_progress,
                   cancel: threading.Event, warmup: float | None = None) -> VerificationRecord:
    """The recommended variant run as exported, at the load the export promises a pod (export.verification),
    after a warm-up of `warmup` seconds (default: the run's, else 10 s); Cancelled and KeyboardInterrupt go to
    the caller."""
    pick, asked = status.recommendation, experiment.spec.autoscale
    if pick is None or pick.variant is None:
        return verification.refused("the run has no recommendation")
    variant = experiment.variants()[pick.variant]
    try:   # an autoscaler's load a pod is sized from the pick's capacity stage; without one, the goal's rate
        scaler = None if asked is None else scaler_for(asked, status, choose(experiment, status, None),
                                                       variant.resources.requests.cpu or variant.cpu)
    except ExportRefused as e:
        return verification.refused(str(e))
    planned = verification.plan(experiment, variant, scaler, asked,
                                None if warmup is None else format_duration(warmup))
    print(planned.said(), file=sys.stderr)
    checked = parse_experiment(planned.document)
    ran = new_status(checked)
    backend = LocalBackend(checked, workdir / "verification", on_progress=on_progress, cancel=cancel)
    failed = None

    async def ignored(_: RunStatus) -> None:
        pass
    try:
        asyncio.run(StageEngine(checked, BlockingBackend(backend), on_update=ignored).run(ran))
    except ExperimentFailed as e:
        failed = e.message
    finally:
        backend.close()
    return verification.record(planned, ran, failed)


def cmd_validate(args) -> int:
    experiment = load_experiment_file(args.file)
    print(f"{args.file}: valid")
    print_plan(experiment, sys.stdout)
    return EXIT_OK


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _directory_problem(path: Path) -> str | None:
    """Why `path` cannot be a directory of the run's (made if missing, as mkdir -p would)."""
    existing = _nearest_existing(path)
    if not existing.is_dir():
        return f"{existing} is a file, not a directory"
    return None if os.access(existing, os.W_OK) else f"cannot write in {existing}"


def path_problems(output: str | None, workdir: str | None) -> list[tuple[str, str]]:
    """-o and --workdir, checked before anything starts: a run that cannot write its result is refused. Their
    missing directories are made."""
    problems = []
    if output and Path(output).is_dir():
        problems.append(("-o", f"{output} is a directory; name a .json or .yaml file"))
    elif output and (why := _directory_problem(Path(output).parent)):
        problems.append(("-o", why))
    if workdir and (why := _directory_problem(Path(workdir))):
        problems.append(("--workdir", why))
    return problems


def scaled(experiment: Experiment, args) -> Experiment:
    """The experiment the options make, refused where its own rules refuse it: the result file's spec is what
    ran, and report and compare read it again."""
    made = experiment.scaled(stage_duration=args.stage_duration, warmup_duration=args.warmup_duration,
                             users_scale=args.users_scale)
    try:
        parse_experiment(made.source)
    except ValidationError as e:
        options = " and ".join(option for option, value in (
            ("--stage-duration", args.stage_duration), ("--warmup-duration", args.warmup_duration),
            ("--users-scale", args.users_scale)) if value is not None)
        raise ValidationError([(options, f"the experiment it makes is refused: {path}: {message}")
                               for path, message in e.problems]) from None
    return made


def cmd_run(args) -> int:
    experiment = load_experiment_file(args.file)
    problems = local_problems(experiment) + path_problems(args.output, args.workdir)
    problems = problems or interface_problems(experiment, project_root())
    if problems:
        raise ValidationError(problems)
    experiment = scaled(experiment, args)
    history = prepared(args)
    printer = ProgressPrinter(quiet=args.quiet)
    series = LocalSeries(experiment)
    server = None
    if args.metrics_port:   # before anything is made: a port in use leaves nothing behind
        try:
            server = serve_metrics(series, args.metrics_port)
        except OSError as e:
            raise ValidationError([("--metrics-port", f"cannot listen on 127.0.0.1:{args.metrics_port}: "
                                                      f"{e.strerror}")]) from None
    output = Path(args.output) if args.output else None
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
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

    def on_update(current: RunStatus) -> None:
        if output:
            write_result(output, _document(experiment, current, engine.artifacts))

    async def on_engine_update(current: RunStatus) -> None:
        printer.note_status(current)
        series.note_status(current.to_status())
        on_update(current)

    print_plan(experiment, sys.stderr)
    printer.say(f"logs: {workdir}")
    if server is not None:
        printer.say(f"live series: http://127.0.0.1:{args.metrics_port}/metrics")

    def on_progress(progress: Progress) -> None:
        series.note_progress(progress)
        printer(progress)

    backend = LocalBackend(experiment, workdir, on_progress=on_progress, cancel=cancel)
    engine = StageEngine(experiment, BlockingBackend(backend), on_update=on_engine_update)
    code = EXIT_OK
    try:
        asyncio.run(engine.run(status))
        if experiment.spec.verify and status.phase == "Succeeded":
            status.verification = verify_locally(experiment, status, workdir, on_progress, cancel,
                                                 args.warmup_duration)
    except (Cancelled, KeyboardInterrupt):
        name = signal.Signals(received[0]).name if received else "SIGINT"
        status = status.ended("Failed", "Interrupted", f"interrupted by {name}; finished stages are kept", now())
        code = 128 + (received[0] if received else signal.SIGINT)
    except ExperimentFailed as e:
        status = status.ended("Failed", e.reason, e.message, now())
        code = EXIT_FAILED
    finally:
        backend.close()
        for s, handler in previous.items():
            signal.signal(s, handler)
    on_update(status)
    series.note_status(status.to_status())
    if server is not None:
        time.sleep(args.metrics_hold)
        server.shutdown()
    printer.say("")
    run = status
    sys.stdout.write(render_status(run, with_phase=False))
    if status.phase != "Succeeded":
        printer.say(f"{status.phase}: {status.message}")
        printer.say(f"logs kept in {workdir}")
    elif not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    if output:
        printer.say(f"result written to {output}")
    if history is not None and status.has_stages():
        printer.say(record(history, _document(experiment, status, engine.artifacts), uid=str(uuid.uuid4()),
                           labels=dict(args.label)))
    if code == EXIT_OK and any(s.nothing_succeeded() for v in run.variants for s in v.stages):
        code = EXIT_NOTHING_SUCCEEDED
    if code == EXIT_OK and args.fail_on_threshold and any(failed_objective(run, v) for v in run.variants):
        code = EXIT_THRESHOLDS
    return code
