"""The `loadstage` command."""

from __future__ import annotations

import os
import signal
import sys

from loadstage.api.schema import ValidationError
from loadstage.cli.export import cmd_export
from loadstage.cli.history import cmd_history
from loadstage.cli.operator import cmd_crd, cmd_operator, cmd_reference
from loadstage.cli.parser import EXIT_INVALID, build_parser
from loadstage.cli.results import cmd_artifacts, cmd_compare, cmd_report
from loadstage.cli.run import cmd_run, cmd_validate
from loadstage.cli.verify import cmd_verify


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"run": cmd_run, "validate": cmd_validate, "report": cmd_report, "compare": cmd_compare,
                "artifacts": cmd_artifacts, "history": cmd_history, "export": cmd_export,
                "verify": cmd_verify,
                "crd": cmd_crd, "reference": cmd_reference, "operator": cmd_operator}[args.command](args)
    except ValidationError as e:
        for path, message in e.problems:
            print(f"error: {path}: {message}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:   # Ctrl-C while following a run
        return 128 + signal.SIGINT
    except BrokenPipeError:   # the reader went away (`loadstage report ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE

