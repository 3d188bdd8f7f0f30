"""`loadstage-proxy nginx|httpd --listen HOST:PORT --upstream ADDRESS`: a front proxy in front of the WSGI
server, in the foreground. It writes its configuration to a directory of its own (under $TMPDIR) and runs
nginx or Apache httpd (Debian's) with it: they read their settings from files, not a command line.
The upstream is host:port or unix:PATH; --protocol says what it speaks there: http, or fastcgi (flup).
In HTTP both keep connections to the upstream open between requests; in FastCGI each request has its own.
Nothing is logged but errors."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

SERVERS = ("nginx", "httpd")
PROTOCOLS = ("http", "fastcgi")
NGINX = "/usr/sbin/nginx"
HTTPD = "/usr/sbin/apache2"
HTTPD_MODULES = "/usr/lib/apache2/modules"
HTTPD_THREADS_PER_PROCESS = 25    # the event MPM's default
NGINX_CONNECTIONS_PER_WORKER = 10240
UPSTREAM_KEEPALIVE = 64           # idle connections nginx keeps to the upstream, per worker
UPSTREAM_IDLE_SECONDS = 1         # ... for at most this long: under gunicorn's --keep-alive (2 s)
MAX_BODY = "16m"
ROOT_USER = ("nobody", "nogroup")  # whom the workers run as when the proxy is started by root (a local run)

# what a FastCGI app needs to build its WSGI environ; nginx sends nothing it is not told to
FASTCGI_PARAMS = {"REQUEST_METHOD": "$request_method", "QUERY_STRING": "$query_string",
                  "CONTENT_TYPE": "$content_type", "CONTENT_LENGTH": "$content_length", "SCRIPT_NAME": "",
                  "PATH_INFO": "$uri", "REQUEST_URI": "$request_uri", "SERVER_PROTOCOL": "$server_protocol",
                  "REQUEST_SCHEME": "$scheme", "REMOTE_ADDR": "$remote_addr", "REMOTE_PORT": "$remote_port",
                  "SERVER_ADDR": "$server_addr", "SERVER_PORT": "$server_port", "SERVER_NAME": "$server_name"}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="loadstage-proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("server", choices=SERVERS)
    parser.add_argument("--listen", action="append", required=True, help="host:port (repeatable)")
    parser.add_argument("--upstream", required=True, help="host:port or unix:PATH")
    parser.add_argument("--protocol", choices=PROTOCOLS, default="http")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--backlog", type=int, default=2048)
    return parser.parse_args(argv)


def nginx_config(args: argparse.Namespace, directory: Path, as_root: bool) -> str:
    if args.protocol == "fastcgi":
        params = "".join(f"            fastcgi_param {k} \"{v}\";\n" for k, v in FASTCGI_PARAMS.items())
        forward = f"            fastcgi_pass app;\n{params}"
    else:
        forward = ("            proxy_pass http://app;\n            proxy_http_version 1.1;\n"
                   "            proxy_set_header Connection \"\";\n            proxy_set_header Host $host;\n")
    # a FastCGI connection per request, as both servers' defaults are: flup serves a kept one on a thread
    # of its own until it closes
    # an idle kept connection is dropped before the server drops it (gunicorn after 2 s): else nginx may send a
    # request on a connection the server is closing, and answer a POST, which it does not retry, with 502
    keepalive = (f"        keepalive {UPSTREAM_KEEPALIVE};\n        keepalive_timeout {UPSTREAM_IDLE_SECONDS}s;\n"
                 if args.protocol == "http" else "")
    listen = "".join(f"        listen {address} backlog={args.backlog};\n" for address in args.listen)
    temp = "".join(f"    {kind}_temp_path {directory / kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"{'user ' + ' '.join(ROOT_USER) + ';' if as_root else ''}\n"
            f"worker_processes {args.workers};\npid {directory / 'nginx.pid'};\nerror_log stderr warn;\n"
            f"events {{\n    worker_connections {NGINX_CONNECTIONS_PER_WORKER};\n}}\n"
            f"http {{\n    access_log off;\n    client_max_body_size {MAX_BODY};\n"
            f"    client_body_buffer_size 1m;\n{temp}"
            f"    upstream app {{\n        server {args.upstream};\n{keepalive}    }}\n"
            f"    server {{\n{listen}        location / {{\n{forward}        }}\n    }}\n}}\n")


def httpd_config(args: argparse.Namespace, directory: Path, as_root: bool) -> str:
    modules = ("mpm_event", "authz_core", "proxy", *(("proxy_http",) if args.protocol == "http" else ("proxy_fcgi",)))
    scheme = "fcgi" if args.protocol == "fastcgi" else "http"
    if args.upstream.startswith("unix:"):
        backend = f"{args.upstream}|{scheme}://localhost/"
    else:
        backend = f"{scheme}://{args.upstream}/"
    threads = HTTPD_THREADS_PER_PROCESS
    lines = [f"ServerRoot {directory}", f"DefaultRuntimeDir {directory}", "ServerName localhost",
             f"PidFile {directory / 'httpd.pid'}",
             "ErrorLog /dev/stderr", "LogLevel warn", f"Mutex file:{directory} default",
             *(f"LoadModule {m}_module {HTTPD_MODULES}/mod_{m}.so" for m in modules),
             *(f"Listen {address}" for address in args.listen), f"ListenBacklog {args.backlog}",
             f"StartServers {args.workers}", f"ServerLimit {args.workers}", f"ThreadsPerChild {threads}",
             f"MaxRequestWorkers {args.workers * threads}", f"MinSpareThreads {threads}",
             f"MaxSpareThreads {args.workers * threads}", "MaxConnectionsPerChild 0",
             "KeepAlive On", "KeepAliveTimeout 5", "MaxKeepAliveRequests 0",
             f"LimitRequestBody {16 * 2**20}",
             *([f"User {ROOT_USER[0]}", f"Group {ROOT_USER[1]}"] if as_root else []),
             # mod_proxy_fcgi sends the whole path as SCRIPT_NAME; a WSGI app routes on PATH_INFO
             *(['ProxyFCGISetEnvIf "true" PATH_INFO "%{REQUEST_URI}"', 'ProxyFCGISetEnvIf "true" SCRIPT_NAME ""']
               if args.protocol == "fastcgi" else []),
             # as nginx's keepalive_timeout: a reused connection gunicorn was closing answered a GET with 502
             f"ProxyPass / {backend} retry=0" + (f" ttl={UPSTREAM_IDLE_SECONDS}" if args.protocol == "http" else "")]
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace, config: Path) -> list[str]:
    if args.server == "nginx":
        return [NGINX, "-c", str(config), "-e", "stderr", "-g", "daemon off;"]
    return [HTTPD, "-f", str(config), "-DFOREGROUND"]


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    as_root = os.geteuid() == 0
    directory = Path(tempfile.mkdtemp(prefix=f"loadstage-{args.server}-"))
    if as_root:
        directory.chmod(0o755)
    config = directory / f"{args.server}.conf"
    config.write_text((nginx_config if args.server == "nginx" else httpd_config)(args, directory, as_root))
    argv_ = command(args, config)
    sys.stdout.flush()
    os.execv(argv_[0], argv_)      # the proxy is this process: signals reach it, its exit status is ours
    return 1


if __name__ == "__main__":
    sys.exit(main())
