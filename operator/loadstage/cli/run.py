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
from pathlib import Path
from typing import Any

import yaml

from loadstage.api.load import load_experiment_file
from loadstage.api.names import API_GROUP, API_VERSION, KIND
from loadstage.api.quantities import format_duration
from loadstage.api.schema import ValidationError
from loadstage.api.status import RunStatus, VariantRecord
from loadstage.api.types import Experiment
from loadstage.cli.parser import EXIT_FAILED, EXIT_NOTHING_SUCCEEDED, EXIT_OK, EXIT_THRESHOLDS
from loadstage.engine import halving, recommend
from loadstage.engine.backend import BlockingBackend
from loadstage.engine.clock import now, parse
from loadstage.engine.errors import Cancelled, ExperimentFailed
from loadstage.engine.stages import StageEngine, new_status
from loadstage.engine.steps import plan, starts_block
from loadstage.local.backend import LocalBackend, Progress
from loadstage.local.live_metrics import LocalSeries
from loadstage.local.live_metrics import serve as serve_metrics
from loadstage.local.target import local_problems
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
    failed already at `from` (or its injectors, not the target, ran out); a goal's, only where none passed."""
    if run.recommendation is not None:
        return run.recommendation.winner is None
    if variant.search is not None:
        return variant.search.reason in ("FloorFailed", "InjectorBound")
    return any(s.verdict and not s.verdict.passed for s in variant.stages)


def _print_search(experiment: Experiment, out) -> None:
    spec, search = experiment.spec, experiment.spec.search
    assert search is not None
    variants = experiment.variants()
    typical, most = search.most_stages() // 2, search.most_stages()
    warmup = spec.warmup.duration if spec.warmup else 0.0
    length = format_duration(search.seconds) + " a stage"
    if spec.stage_end.decided:
        length = f"{format_duration(spec.stage_end.min)} to {length}, ending once decided"
    out.write(f"{experiment.name}: {len(variants)} variant(s), a capacity search each: {search.load} from "
              f"{search.from_:,} up to {search.max:,}, to {search.resolution:.0%}, {length}; about {typical} "
              f"stages a variant (at most {most}), {'up to' if spec.stage_end.decided else 'about'} "
              f"{format_duration(int(len(variants) * (typical * search.seconds + warmup)))} of load\n")
    if spec.goal is not None:
        out.write(f"  then the most capacity per core: every search first to within "
                  f"{halving.COARSE_RESOLUTION:.0%}, the variants that cannot reach the best's dropped, the rest "
                  f"searched on to {search.resolution:.0%}\n")
    for v in variants:
        out.write(f"  variant {v.index + 1}: {v.label()}\n")


def _print_goal(experiment: Experiment, out) -> None:
    spec = experiment.spec
    assert spec.slo is not None and spec.goal is not None and spec.stage_end.max is not None   # a pick's rules
    order, costs, declared = recommend.cheapest_first(experiment.variants())
    warmup = spec.warmup.duration if spec.warmup else 0.0
    out.write(f"{experiment.name}: {len(order)} variant(s), the cheapest that meets {spec.slo.describe()} at "
              f"{spec.goal.describe()}: one stage each at that load, {format_duration(spec.stage_end.min)} to "
              f"{format_duration(spec.stage_end.max)}, ending once decided; "
              + ("cheapest first, by their CPU limits or requests" if declared else
                 "every variant, each costed by its measured peak CPU (not all set a CPU limit or request)")
              + f"; at most {format_duration(int(len(order) * (spec.stage_end.max + warmup)))} of load, "
                f"undecided stages aside\n")
    for v in order:
        cost = costs[v.index]
        out.write(f"  variant {v.index + 1}: {v.label()}" + (f", {cost.describe()}" if declared and cost else "")
                  + "\n")
    if note := recommend.warmup_note(experiment):
        out.write(f"  note: {note}\n")


def _print_plan(experiment: Experiment, out) -> None:
    spec = experiment.spec
    if spec.search is not None:
        return _print_search(experiment, out)
    if spec.goal is not None and spec.goal.load is not None:
        return _print_goal(experiment, out)
    variants = experiment.variants()
    steps = plan(experiment, spec.seed)
    starts = sum(starts_block(steps, i) for i in range(len(steps)))
    total = sum(s.stage.duration for s in steps) + (spec.warmup.duration * starts if spec.warmup else 0)
    repeats = f" x {spec.repeats} repeats ({spec.order})" if spec.repeats > 1 else ""
    at_most = "at most " if any(s.requests for s in spec.stages) else "about "
    out.write(f"{experiment.name}: {len(variants)} variant(s) x {len(spec.stages)} stage(s){repeats}, "
              f"{at_most}{format_duration(int(total))} of load\n")
    for v in variants:
        out.write(f"  variant {v.index + 1}: {v.label()}\n")
    for i, s in enumerate(spec.stages, 1):
        users = spec.injectors.users_for(s)
        length = f"{s.requests:,} requests (at most {format_duration(s.duration)})" if s.requests \
            else format_duration(s.duration)
        out.write(f"  stage {i}: {s.injectors} injector(s), {users} users, {length}\n")


def cmd_validate(args) -> int:
    experiment = load_experiment_file(args.file)
    print(f"{args.file}: valid")
    _print_plan(experiment, sys.stdout)
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


def cmd_run(args) -> int:
    experiment = load_experiment_file(args.file)
    problems = local_problems(experiment) + path_problems(args.output, args.workdir)
    if problems:
        raise ValidationError(problems)
    experiment = experiment.scaled(
        stage_duration=args.stage_duration, warmup_duration=args.warmup_duration,
        users_scale=args.users_scale)
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

    _print_plan(experiment, sys.stderr)
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
    if code == EXIT_OK and any(s.nothing_succeeded() for v in run.variants for s in v.stages):
        code = EXIT_NOTHING_SUCCEEDED
    if code == EXIT_OK and args.fail_on_threshold and any(failed_objective(run, v) for v in run.variants):
        code = EXIT_THRESHOLDS
    return code
