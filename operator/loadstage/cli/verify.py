"""`loadstage verify RESULT`: a finished run's recommendation run again, as exported, at the load the export
promises a pod, on this machine (export.verification); its answer goes into the result's status.verification."""

from __future__ import annotations

import signal
import sys
import tempfile
import threading
from pathlib import Path

from loadstage.api.schema import ValidationError
from loadstage.cli.parser import EXIT_FAILED, EXIT_OK, EXIT_THRESHOLDS
from loadstage.cli.run import ProgressPrinter, verify_locally, write_result
from loadstage.engine.errors import Cancelled
from loadstage.local.target import local_problems
from loadstage.reports import sources
from loadstage.reports.terminal import render_verification

EXIT_BY_RESULT = {"Holds": EXIT_OK, "Breaks": EXIT_THRESHOLDS, "Undecided": EXIT_FAILED}


def cmd_verify(args) -> int:
    if sources.is_resource(args.source):
        raise ValidationError([(args.source, "`loadstage verify` runs on this machine, from a result file "
                                             "(`loadstage run -o`); in a cluster, spec.verify: true has the "
                                             "operator verify the pick through the exported HPA")])
    document = sources.load_document(args.source)
    experiment = sources.experiment_of(args.source, document)
    status = sources.results_of(args.source, document)
    goal = experiment.spec.goal
    if goal is None or goal.rps is None:
        raise ValidationError([(args.source, "verify runs a run's recommendation at the req/s its export promises: "
                                             "the run needs spec.goal.rps")])
    if problems := local_problems(experiment):
        raise ValidationError(problems)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix=f"loadstage-verify-{experiment.name}-"))
    printer = ProgressPrinter(quiet=args.quiet)
    cancel = threading.Event()
    previous = {s: signal.signal(s, lambda *_: cancel.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        status.verification = verify_locally(experiment, status, workdir, printer, cancel, args.warmup_duration)
    except (Cancelled, KeyboardInterrupt):
        printer.say(f"interrupted: {args.source} is left as it was; logs: {workdir}")
        return 128 + signal.SIGINT
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    printer.say("")
    sys.stdout.write("".join(line + "\n" for line in render_verification(status)))
    document["status"] = status.to_status()
    output = Path(args.output or args.source)
    write_result(output, document)
    printer.say(f"status.verification written to {output}; logs: {workdir}")
    return EXIT_BY_RESULT[status.verification["result"]]
