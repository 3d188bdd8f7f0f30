"""The local engine's readiness probes, against a real HTTP server on loopback: a status from 200 to 399
passes (a redirect is not followed), anything else fails and says why; tcpSocket wants an open port."""

import http.server
import threading

import pytest

from loadstage.api.types import HttpGet, Probe, TcpSocket
from loadstage.local.ports import free_port
from loadstage.local.readiness import probe_once


class Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = {"/ok": 200, "/moved": 302, "/missing": 404, "/broken": 500}[self.path]
        self.send_response(code)
        if code == 302:
            self.send_header("Location", "/missing")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def http_probe(path, port=None):
    return Probe(HttpGet(path, port), None, None, None, None, None, None, None)


def tcp_probe(port=None):
    return Probe(None, TcpSocket(port), None, None, None, None, None, None)


def test_http_probes_pass_from_200_to_399_without_following_a_redirect(server):
    assert probe_once(http_probe("/ok"), server) is None
    assert probe_once(http_probe("/moved"), server) is None
    assert probe_once(http_probe("/missing"), server) == "GET /missing answered 404"
    assert probe_once(http_probe("/broken"), server) == "GET /broken answered 500"


def test_a_probe_port_overrides_the_instances_port(server):
    closed = free_port()
    assert probe_once(http_probe("/ok", port=server), closed) is None
    assert "ConnectionRefusedError" in probe_once(http_probe("/ok"), closed)


def test_tcp_probes_want_an_open_port(server):
    assert probe_once(tcp_probe(), server) is None
    assert "ConnectionRefusedError" in probe_once(tcp_probe(), free_port())
