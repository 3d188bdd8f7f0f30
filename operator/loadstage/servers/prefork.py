"""`loadstage-prefork SERVER --bind ADDRESS --workers W APP`: serves APP (module:callable) with bjoern,
meinheld or flup, which are libraries without a command line. The parent binds the listening socket
(host:port, or unix:PATH) and forks W workers; each imports the app and serves that socket: bjoern and
meinheld on an event loop, one request at a time; flup in FastCGI, one request at a time (--worker-class
prefork) or on a pool of --threads threads (threaded). SIGTERM or SIGINT stops the workers, then the parent.
A worker that dies ends the whole server, with the worker's exit status: a load test must see it."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import sys
import traceback

from loadstage.api.servers import BY_NAME, PREFORK_SERVERS

FLUP_CLASSES = BY_NAME["flup"].classes
UNIX_SOCKET_MODE = 0o666   # a front proxy may run as another user


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadstage-prefork", description=__doc__.split("\n\n")[0])
    parser.add_argument("server", choices=PREFORK_SERVERS)
    parser.add_argument("app", help="module:callable")
    parser.add_argument("--bind", required=True, help="host:port or unix:PATH")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--backlog", type=int, default=2048)
    parser.add_argument("--worker-class", choices=FLUP_CLASSES, default=FLUP_CLASSES[0], help="flup only")
    parser.add_argument("--threads", type=int, default=1, help="flup's threaded class only")
    return parser.parse_args(argv)


def listening_socket(bind: str, backlog: int) -> socket.socket:
    if bind.startswith("unix:"):
        path = bind.removeprefix("unix:")
        if os.path.exists(path):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(path)
        os.chmod(path, UNIX_SOCKET_MODE)
    else:
        host, _, port = bind.rpartition(":")
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # inherited by each accepted connection: flup writes a response in several records, and Nagle would
        # hold the last ones for the proxy's delayed ACK (40 ms a request)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host.strip("[]"), int(port)))
    sock.setblocking(False)
    sock.listen(backlog)
    return sock


def load_app(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "application")


def serve(server: str, sock: socket.socket, args: argparse.Namespace) -> None:
    """One worker: the app on the inherited socket, until SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    app = load_app(args.app)
    if server == "flup":
        serve_fastcgi(app, sock, args.worker_class, args.threads)
    elif server == "bjoern":
        import bjoern
        bjoern.server_run(sock, app)
    else:
        from meinheld import server as meinheld
        meinheld.set_access_logger(None)
        meinheld.set_listen_socket(sock.fileno())
        meinheld.run(app)


def serve_fastcgi(app, sock: socket.socket, worker_class: str, threads: int) -> None:
    """flup binds a socket of its own unless it is handed one: each worker serves the parent's."""
    if worker_class == "prefork":
        from flup.server.fcgi_single import WSGIServer
        server = WSGIServer(app, debug=False)
    else:
        from flup.server.fcgi import WSGIServer
        server = WSGIServer(app, debug=False, maxThreads=threads, minSpare=threads, maxSpare=threads)
    server._setupSocket = lambda: sock
    server.run()     # returns once SIGTERM or SIGINT stopped it (flup handles both)
    os._exit(0)


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
                serve(args.server, sock, args)
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
