"""Workers and threads on a container loadstage did not build (an existing Deployment's), set the way its
server reads them: a flag already in the container's command line is rewritten; otherwise the server's
environment variable is set (gunicorn's GUNICORN_CMD_ARGS merged with the value already there). An ASGI app's
threads are its sync thread pool, set in its environment (servers.sync_pool_env), which the app reads. A value
that cannot be set is refused, naming why; it is never dropped."""

from __future__ import annotations

import copy
import shlex
from typing import Any

from loadstage.api.servers import ASGI, BY_NAME, Setting, kind, sync_pool_env
from loadstage.api.types import Variant
from loadstage.engine.errors import ExperimentFailed


class SettingsNotSettable(ExperimentFailed):
    def __init__(self, message: str):
        super().__init__("SettingsNotSettable", message)


def _wanted(variant: Variant, asgi: bool) -> dict[str, str]:
    # a single-process server has no workers to set, a single-thread one no threads: the rules hold them at 1;
    # an ASGI app's threads are its sync thread pool, set in its environment
    entry = BY_NAME.get(variant.server)
    workers = variant.workers if entry is None or entry.workers else None
    threads = variant.threads if (entry is None or entry.threads) and not asgi else None
    worker_class = entry.class_argument(variant.worker_class) if entry else variant.worker_class
    values = {"workers": workers, "threads": threads, "worker_class": worker_class}
    return {k: str(v) for k, v in values.items() if v is not None}


def _rewrite(argv: list[str], flags: tuple[str, ...], value: str) -> tuple[list[str], bool]:
    """`argv` with every `FLAG VALUE`, `--flag=VALUE` and `-fVALUE` of `flags` given `value`; whether any was
    found. A flag inside a shell string (`sh -c "gunicorn -w 4 ..."`) cannot be rewritten: refused."""
    out, found, i = [], False, 0
    shorts = [f for f in flags if len(f) == 2 and f[0] == "-" and f[1] != "-"]
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        if name in flags and "=" in arg and arg.startswith("--"):
            out.append(f"{name}={value}")
            found = True
        elif arg in flags and i + 1 < len(argv):
            out += [arg, value]
            found = True
            i += 1
        elif any(arg.startswith(f) and len(arg) > 2 and not arg.startswith("--") for f in shorts):
            out.append(arg[:2] + value)
            found = True
        elif " " in arg and any(f" {f}" in f" {arg}" for f in flags):
            raise SettingsNotSettable(f"the container runs its server from a shell string ({arg!r}) that sets "
                                      f"{flags[-1]} itself; loadstage cannot rewrite it there")
        else:
            out.append(arg)
        i += 1
    return out, found


def _set_env(env: list[dict[str, Any]], name: str, value: str) -> list[dict[str, Any]]:
    return [e for e in env if e.get("name") != name] + [{"name": name, "value": value}]


def _merged_args(variable: str, env: list[dict[str, Any]], settings: dict[str, tuple[tuple[str, ...], str]]) -> str:
    """A variable of the server's flags (gunicorn's GUNICORN_CMD_ARGS): the value already set, its flags for these
    settings replaced."""
    current = next((e for e in env if e.get("name") == variable), None)
    if current is not None and "value" not in current:
        raise SettingsNotSettable(f"{variable} comes from a Secret or ConfigMap (valueFrom), which loadstage "
                                  f"does not rewrite; give the workers and threads as flags in the container's "
                                  f"args, or set the variable as a plain value")
    argv = shlex.split(current["value"]) if current else []
    for flags, value in settings.values():
        argv, found = _rewrite(argv, flags, value)
        if not found:
            argv += [flags[-1], value]
    return shlex.join(argv)


def apply_server_settings(container: dict[str, Any], variant: Variant, interface: str | None = None
                          ) -> dict[str, Any]:
    """The container with the variant's workers, threads and worker class, as its server reads them; under an
    ASGI server (its worker class's, or `interface`), threads are the app's sync thread pool (SYNC_THREADS_ENV)."""
    server, entry = variant.server, BY_NAME.get(variant.server)
    app_kind = kind(server, variant.worker_class, interface)
    wanted = _wanted(variant, app_kind == ASGI)
    sync_threads = sync_pool_env(app_kind, variant.threads)
    if not wanted and not sync_threads:
        return container
    known: dict[str, Setting] = (entry.settings or {}) if entry is not None else {}
    if (entry is None or entry.settings is None) and wanted:
        raise SettingsNotSettable(f"loadstage cannot set workers or threads of a {server} server in an existing "
                                  f"container; leave them out of spec.target and spec.matrix")
    container = copy.deepcopy(container)
    command, args = list(container.get("command") or []), list(container.get("args") or [])
    env = list(container.get("env") or [])
    for name, value in sync_threads.items():
        env = _set_env(env, name, value)
    unflagged: dict[str, tuple[tuple[str, ...], str]] = {}
    for setting, value in wanted.items():
        if setting not in known:
            raise SettingsNotSettable(f"{server} has no {setting.replace('_', ' ')} setting (spec.target or "
                                      f"spec.matrix sets one)")
        flags, variable = known[setting].flags, known[setting].env
        command, in_command = _rewrite(command, flags, value)
        args, in_args = _rewrite(args, flags, value)
        if in_command or in_args:
            continue
        if variable is not None:
            env = _set_env(env, variable, value)
        else:
            unflagged[setting] = (flags, value)
    assert entry is not None or not unflagged   # a setting wanted is one the server's entry has
    if unflagged and entry and entry.settings_env_args:
        env = _set_env(env, entry.settings_env_args, _merged_args(entry.settings_env_args, env, unflagged))
    elif unflagged and entry:
        program = entry.program
        added = [a for flags, value in unflagged.values()
                 for a in ([f"{flags[-1]}={value}"] if entry.flag_equals else [flags[-1], value])]
        # options go right after the program: waitress-serve reads none after the app
        for part in (command, args):
            at = next((i for i, a in enumerate(part) if a.rsplit("/", 1)[-1] == program), None)
            if at is not None:
                part[at + 1:at + 1] = added
                break
        else:
            raise SettingsNotSettable(
                f"{server} reads {', '.join(unflagged)} only from its command line, and the container's command "
                f"and args do not run {program} (an entrypoint script?); loadstage cannot set it there")
    if command:
        container["command"] = command
    if args:
        container["args"] = args
    if env:
        container["env"] = env
    return container
