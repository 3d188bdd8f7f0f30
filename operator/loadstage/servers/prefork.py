"""`loadstage-prefork SERVER --bind ADDRESS --workers W APP`: serves APP (module:callable) with bjoern or
meinheld, which are libraries without a command line. The parent binds the listening socket (host:port,
or unix:PATH) and forks W workers; each imports the app and serves that socket on its own event loop, one
request at a time (neither server has threads). SIGTERM or SIGINT stops the workers, then the parent.
A worker that dies ends the whole server, with the worker's exit status: a load test must see it."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import sys
import traceback

SERVERS = ("bjoern", "meinheld")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadstage-prefork", description=__doc__.split("\n\n")[0])
    parser.add_argument("server", choices=SERVERS)
    parser.add_argument("app", help="module:callable")
    parser.add_argument("--bind", required=True, help="host:port or unix:PATH")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--backlog", type=int, default=2048)
    return parser.parse_args(argv)


def listening_socket(bind: str, backlog: int) -> socket.socket:
    if bind.startswith("unix:"):
        path = bind.removeprefix("unix:")
        if os.path.exists(path):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
    else:
        host, _, port = bind.rpartition(":")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), int(port)))
    sock.setblocking(False)
    sock.listen(backlog)
    return sock


def load_app(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "application")


def serve(server: str, sock: socket.socket, app_spec: str) -> None:
    """One worker: the app on the inherited socket, until SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    app = load_app(app_spec)
    if server == "bjoern":
        import bjoern
        bjoern.server_run(sock, app)
    else:
        from meinheld import server as meinheld
        meinheld.set_access_logger(None)
        meinheld.set_listen_socket(sock.fileno())
        meinheld.run(app)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    sock = listening_socket(args.bind, args.backlog)
    children: set[int] = set()
    stopping = False

    def stop(signum, _frame):
        nonlocal stopping
        stopping = True
        for pid in children:
            os.kill(pid, signal.SIGTERM)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            try:
                serve(args.server, sock, args.app)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)      # a worker only returns when its server failed
        children.add(pid)
    status = 0
    while children:
        try:
            pid, code = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        children.discard(pid)
        if not stopping:        # a worker died on its own: the whole server goes, as a pod would
            code = os.waitstatus_to_exitcode(code)
            status = 128 - code if code < 0 else code or 1
            stop(signal.SIGTERM, None)
    if sock.family == socket.AF_UNIX:
        os.unlink(sock.getsockname())
    return 0 if stopping and status == 0 else status


if __name__ == "__main__":
    sys.exit(main())
