"""The operator's edge without a cluster: deadlines on API requests, and what a lost API server
leaves in the status."""

import asyncio
import socket
import subprocess
import sys
import textwrap

import kopf
import pytest
import urllib3

from loadstage.edge import handlers
from loadstage.engine.stages import StageEngine
from loadstage.kube.manifests import Defaults
from support.documents import BASE


def test_a_request_to_an_api_server_that_never_answers_ends_at_its_deadline():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)   # accepts connections, never answers
        port = silent.getsockname()[1]
        code = textwrap.dedent(f"""
            import time, kubernetes
            from loadstage.kube.client import api_client
            cfg = kubernetes.client.Configuration()
            cfg.host = "http://127.0.0.1:{port}"
            cfg.retries = False
            started = time.monotonic()
            try:
                kubernetes.client.CoreV1Api(api_client(cfg, connect=1, read=1)).list_namespace()
            except Exception as e:
                print(type(e).__name__, round(time.monotonic() - started, 1))
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    name, seconds = out.stdout.split()
    assert name == "ReadTimeoutError", out.stdout + out.stderr
    assert float(seconds) < 5


def test_kopf_requests_have_deadlines():
    settings = kopf.OperatorSettings()
    handlers.tune(settings)
    assert settings.networking.request_timeout == handlers.API_READ_TIMEOUT <= 60
    assert settings.networking.connect_timeout == handlers.API_CONNECT_TIMEOUT


def failing_run(monkeypatch, error):
    """The edge's run of an experiment whose engine raises `error`: the statuses written, and a run given the
    status it starts from, which returns the TemporaryError it raised (None if none). One operator's memo."""
    written = []

    class Recorder:
        def __init__(self, *args):
            pass

        def __call__(self, status):
            written.append(status.to_status())

    async def fail(self, status):
        raise error
    monkeypatch.setattr(handlers, "StatusWriter", Recorder)
    monkeypatch.setattr(StageEngine, "run", fail)
    memo = kopf.Memo(config=handlers.OperatorConfig(defaults=Defaults("r", "i", "redis")), api=None,
                     pod_watches=lambda namespace: None, errors=handlers.RepeatedErrors())

    def run(status):
        try:
            asyncio.run(handlers.run({**BASE, "metadata": {"name": "demo", "uid": "u1"}}, status, "ns", 1,
                                     stopped=False, memo=memo, logger=handlers.logging.getLogger("test"),
                                     post_event=lambda *a: None))
        except kopf.TemporaryError as e:
            return e
        return None
    return written, run


@pytest.mark.parametrize("error", [urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104)),
                                   ConnectionRefusedError(111, "Connection refused")])
def test_an_api_error_that_is_not_an_api_exception_is_retried_with_a_message(monkeypatch, error):
    written, run = failing_run(monkeypatch, error)
    assert run({}) is not None
    assert written[-1]["message"].startswith("Kubernetes API unreachable (")
    assert type(error).__name__ in written[-1]["message"] and "retrying in 10s" in written[-1]["message"]


def test_an_unexpected_error_is_on_record_retried_and_fails_the_experiment_when_it_persists(monkeypatch):
    written, run = failing_run(monkeypatch, KeyError("startedAt"))
    raised = []

    def attempt(recorded_stages):
        stages = [{"stage": n + 1, "injectors": 1, "requests": 0, "failures": 0, "latencyMs": {}}
                  for n in range(recorded_stages)]
        raised.append(run({"variants": [{"index": 0, "stages": stages}]}))
        return written[-1]

    first = attempt(0)
    assert first["phase"] == "Pending" and first["message"] == (   # the phase stored (none: Pending), not Failed
        "the operator's unexpected error: KeyError: 'startedAt'; retrying in 10s (1 of 3 before the experiment fails)")
    attempt(0)
    assert attempt(1)["message"].endswith("(1 of 3 before the experiment fails)")   # a stage recorded since
    attempt(1)
    failed = attempt(1)
    assert (failed["phase"], failed["reason"]) == ("Failed", "OperatorError")
    assert [e is not None for e in raised] == [True, True, True, True, False]
    assert failed["message"] == ("the operator's unexpected error: KeyError: 'startedAt' (3 times in a row; its "
                                 "traceback is in the operator's log)")
