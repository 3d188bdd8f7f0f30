"""The front proxy and the Unix socket: each server's command line behind a proxy, the proxy's own command line,
its nginx and httpd configurations (checked by nginx -t and apache2 -t), and the target pod's sidecar."""

import copy
import subprocess

import pytest
from gunicorn.config import Keepalive

from loadstage.api.load import parse_experiment
from loadstage.kube import manifests
from loadstage.launch import argv
from loadstage.servers import proxy
from support.documents import BASE

DEFAULTS = manifests.Defaults(runner="r:1", injector="i:1", redis="redis:7")
SOCKET = "unix:/run/loadstage/app.sock"

# how each server is told to listen on the Unix socket, and to open it to the proxy's user
UNIX_LISTEN = {
    "gunicorn": ["--bind", SOCKET],
    "uwsgi": ["--http-socket", "/run/loadstage/app.sock"],
    "waitress": ["--unix-socket=/run/loadstage/app.sock", "--unix-socket-perms=666"],
    "cheroot": ["--bind", "/run/loadstage/app.sock"],
    "granian": ["--uds", "/run/loadstage/app.sock", "--uds-permissions", "0o666"],
    "bjoern": ["--bind", SOCKET],
    "meinheld": ["--bind", SOCKET],
    "flup": ["--bind", SOCKET],
}


def experiment(**spec):
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    return parse_experiment(doc)


def containers(e, variant=0):
    return manifests.runner_deployment(e, e.variants()[variant], DEFAULTS)["spec"]["template"]["spec"]


@pytest.mark.parametrize("server", UNIX_LISTEN)
def test_each_server_listens_on_the_unix_socket_it_shares_with_the_proxy(server):
    threads = 1 if server in ("bjoern", "meinheld") else 2
    workers = 1 if server in ("waitress", "cheroot") else 2
    e = experiment(target={"server": server, "workers": workers, "threads": threads,
                           "proxy": {"server": "nginx", "socket": "unix"}})
    (runner, sidecar) = containers(e)["containers"]
    args = runner["args"]
    start = next(i for i, a in enumerate(args) if a == UNIX_LISTEN[server][0])
    assert args[start:start + len(UNIX_LISTEN[server])] == UNIX_LISTEN[server]
    assert not any("0.0.0.0" in a for a in args)
    assert sidecar["args"][sidecar["args"].index("--upstream") + 1] == SOCKET
    if server == "uwsgi":
        assert "--chmod-socket=666" in args


def test_the_proxy_sidecar_takes_the_port_and_readiness_and_forwards_over_loopback_tcp():
    e = experiment(target={"proxy": {"server": "httpd", "workers": 3,
                                     "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}}})
    spec = containers(e)
    runner, sidecar = spec["containers"]
    assert runner["args"][runner["args"].index("--bind") + 1] == "127.0.0.1:8001"
    assert "ports" not in runner and "readinessProbe" not in runner
    assert runner["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8000}   # through the proxy
    assert sidecar["name"] == "proxy" and sidecar["image"] == "r:1"
    assert sidecar["args"] == ["loadstage-proxy", "httpd", "--listen", "0.0.0.0:8000", "--upstream",
                               "127.0.0.1:8001", "--protocol", "http", "--workers", "3", "--backlog", "2048"]
    assert sidecar["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert sidecar["resources"]["limits"] == {"cpu": "250m", "memory": "64Mi"}
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    assert [v["name"] for v in spec["volumes"]] == ["tmp"]      # no socket volume over TCP


def test_a_unix_socket_lives_in_a_volume_both_containers_mount():
    e = experiment(target={"proxy": {"server": "nginx", "socket": "unix"}})
    spec = containers(e)
    assert {"name": "sockets", "emptyDir": {}} in spec["volumes"]
    for container in spec["containers"]:
        assert {"name": "sockets", "mountPath": "/run/loadstage"} in container["volumeMounts"]


def test_a_target_without_a_proxy_keeps_one_container_on_the_port():
    (runner,) = containers(experiment())["containers"]
    assert runner["ports"][0]["containerPort"] == 8000 and runner["readinessProbe"]["httpGet"]["port"] == "http"


def test_flup_is_spoken_to_in_fastcgi_and_gets_its_worker_class_and_threads():
    e = experiment(target={"server": "flup", "workers": 3, "threads": 4, "proxy": {"server": "nginx"}},
                   matrix={"workerClass": ["threaded", "prefork"], "threads": [1]})
    runner, sidecar = containers(e)["containers"]
    assert runner["args"] == ["loadstage-prefork", "flup", "runner_app.app:app", "--bind", "127.0.0.1:8001",
                              "--workers", "3", "--backlog", "2048", "--worker-class", "threaded", "--threads", "1"]
    assert sidecar["args"][sidecar["args"].index("--protocol") + 1] == "fastcgi"
    assert containers(e, 1)["containers"][0]["args"][-3:] == ["prefork", "--threads", "1"]


def proxy_args(server: str, upstream: str, protocol: str):
    return proxy.parse([server, "--listen", "127.0.0.1:18080", "--upstream", upstream, "--protocol", protocol,
                        "--workers", "2"])


def assert_accepted(text: str, path, *check: str) -> None:
    """The server's own configuration test (-t) passes on the written file."""
    path.write_text(text)
    checked = subprocess.run([*check, str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("protocol", proxy.PROTOCOLS)
@pytest.mark.parametrize("upstream", ["127.0.0.1:18001", "unix:/tmp/app.sock"])
def test_nginx_accepts_its_configuration(tmp_path, protocol, upstream):
    text = proxy.nginx_config(proxy_args("nginx", upstream, protocol), tmp_path, as_root=False)
    assert f"server {upstream};" in text and "listen 127.0.0.1:18080 backlog=2048;" in text
    assert "worker_processes 2;" in text and "user " not in text
    if protocol == "fastcgi":
        assert "fastcgi_pass app;" in text and 'fastcgi_param PATH_INFO "$uri";' in text
        assert "keepalive" not in text     # flup would hold a thread per kept connection
    else:
        assert "proxy_pass http://app;" in text and "keepalive 64;" in text
        # idle kept connections end on nginx's side first: a POST sent on one gunicorn was closing got a 502
        assert f"keepalive_timeout {proxy.UPSTREAM_IDLE_SECONDS}s;" in text
        assert Keepalive.default > proxy.UPSTREAM_IDLE_SECONDS
    assert_accepted(text, tmp_path / "nginx.conf", proxy.NGINX, "-t", "-e", "stderr", "-c")


@pytest.mark.parametrize("protocol", proxy.PROTOCOLS)
@pytest.mark.parametrize("upstream", ["127.0.0.1:18001", "unix:/tmp/app.sock"])
def test_httpd_accepts_its_configuration(tmp_path, protocol, upstream):
    text = proxy.httpd_config(proxy_args("httpd", upstream, protocol), tmp_path, as_root=True)
    scheme = "fcgi" if protocol == "fastcgi" else "http"
    backend = f"{upstream}|{scheme}://localhost/" if upstream.startswith("unix:") else f"{scheme}://{upstream}/"
    # idle pooled connections are not reused past the server's keep-alive: one gunicorn was closing got a 502
    assert f"ProxyPass / {backend} retry=0{f' ttl={proxy.UPSTREAM_IDLE_SECONDS}' if scheme == 'http' else ''}\n" in text
    assert "MaxRequestWorkers 50" in text and "User nobody" in text
    assert ("PATH_INFO" in text) == (protocol == "fastcgi")
    assert_accepted(text, tmp_path / "httpd.conf", proxy.HTTPD, "-t", "-f")


def test_the_proxy_command_line_is_the_one_the_local_engine_runs():
    e = experiment(target={"server": "flup", "proxy": {"server": "nginx", "socket": "unix", "workers": 2}})
    v = e.variants()[0]
    bind = argv.app_bind(v, socket_dir="/tmp/x")
    assert bind == "unix:/tmp/x/app.sock"
    assert argv.proxy_command(v, e.spec.target.proxy_of(v), listen=["127.0.0.1:5000"], upstream=bind) == [
        "loadstage-proxy", "nginx", "--listen", "127.0.0.1:5000", "--upstream", "unix:/tmp/x/app.sock",
        "--protocol", "fastcgi", "--workers", "2", "--backlog", "2048"]
