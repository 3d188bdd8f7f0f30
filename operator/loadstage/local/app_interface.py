"""Whether an app of one's own is a WSGI or an ASGI app, found before a local run by importing it as its server
would (the pods' environment and directory) and reading its call's signature: an ASGI app's call is a coroutine
of (scope, receive, send), a WSGI app's a function of (environ, start_response). A server that speaks the other
interface would fail every request, its cause only in the target's log; such a variant is refused instead (not
hypercorn, which tells the two apart and serves either). An app that cannot be imported, or whose signature says
neither, is left to the run, whose first stage names the mismatch from the target's log."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from loadstage.api.servers import ASGI, BY_NAME, WSGI
from loadstage.api.types import Experiment
from loadstage.launch import argv

INSPECT_SECONDS = 30.0
_INSPECT = r"""
import importlib, inspect, sys
module, _, name = sys.argv[1].partition(":")
if "(" in name:
    print("unknown"); sys.exit()
app = importlib.import_module(module)
for part in (name or "application").split("."):
    app = getattr(app, part)
call = app if inspect.isroutine(app) else getattr(app, "__call__", None)
if call is None:
    print("unknown")
elif inspect.iscoroutinefunction(call):
    print("asgi")
else:
    try:
        parameters = inspect.signature(app).parameters.values()
    except (TypeError, ValueError):
        print("unknown"); sys.exit()
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    print({2: "wsgi", 3: "asgi"}.get(len(positional), "unknown"))
"""
SAYS = {WSGI: "a WSGI app (its call takes environ, start_response)",
        ASGI: "an ASGI app (its call is a coroutine of scope, receive, send)"}


def app_interface(experiment: Experiment, root: Path) -> str | None:
    """wsgi, asgi, or None where the app cannot be imported here or its signature says neither."""
    target = experiment.spec.target
    variant = experiment.variants()[0]
    with tempfile.TemporaryDirectory(prefix="loadstage-inspect-") as scratch:
        env = {**os.environ, **argv.runner_env(experiment, variant, redis_url=None, metrics_dir=scratch)}
        try:
            done = subprocess.run([sys.executable, "-c", _INSPECT, target.app], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=INSPECT_SECONDS)
        except subprocess.TimeoutExpired:
            return None
    found = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    return found[0] if found and found[0] in SAYS else None


def interface_problems(experiment: Experiment, root: Path) -> list[tuple[str, str]]:
    """Each variant whose server speaks the other interface than the app of one's own, naming both."""
    target = experiment.spec.target
    if target.runner_app or target.command is not None or target.deployment is not None:
        return []
    found = app_interface(experiment, root)
    if found is None:
        return []
    wrong = [v for v in experiment.variants() if argv.kind_of(experiment, v) != found and
             not (v.server in BY_NAME and BY_NAME[v.server].serves_either)]
    return [("spec.target.app", f"{target.app} is {SAYS[found]}, but {v.label()} speaks "
                                f"{argv.kind_of(experiment, v).upper()}: it would fail every request")
            for v in wrong]
