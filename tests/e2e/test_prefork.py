"""loadstage-prefork, the launcher of bjoern and meinheld: W workers that serve one socket, stopped by SIGTERM,
and a worker that dies takes the whole server down (a load test must see it)."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from loadstage.local.ports import free_port
from support.waiting import wait_for

pytestmark = pytest.mark.e2e
APP = ("def app(environ, start_response):\n    start_response('200 OK', [])\n"
       "    return [str(__import__('os').getpid()).encode()]\n")


def start(tmp_path, server, bind):
    (tmp_path / "pidapp.py").write_text(APP)
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "loadstage-prefork"), server,
                             "pidapp:app", "--bind", bind, "--workers", "2"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)}, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(psutil.Process(proc.pid).children()) == 2, timeout=10)
    return proc


@pytest.mark.parametrize("server", ["bjoern", "meinheld"])
def test_two_workers_serve_one_port_and_sigterm_stops_them_all(tmp_path, server):
    port = free_port()
    proc = start(tmp_path, server, f"127.0.0.1:{port}")
    workers = {c.pid for c in psutil.Process(proc.pid).children()}

    def answered_by():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
            return int(response.read())
    wait_for(lambda: _answers(answered_by), timeout=10)
    seen = {answered_by() for _ in range(200)}
    assert seen <= workers and seen, (seen, workers)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert not [pid for pid in workers if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_a_worker_that_dies_ends_the_server_with_its_status_and_a_unix_socket_is_removed(tmp_path):
    path = tmp_path / "app.sock"
    proc = start(tmp_path, "bjoern", f"unix:{path}")
    client = socket.socket(socket.AF_UNIX)
    client.connect(str(path))
    client.sendall(b"GET / HTTP/1.0\r\n\r\n")
    assert b"200 OK" in client.recv(4096)
    client.close()
    victim, other = psutil.Process(proc.pid).children()
    os.kill(victim.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == 128 + signal.SIGKILL
    wait_for(lambda: not other.is_running() or other.status() == "zombie", timeout=10)
    assert not path.exists()


def _answers(ask) -> bool:
    try:
        ask()
        return True
    except OSError:
        time.sleep(0.1)
        return False
