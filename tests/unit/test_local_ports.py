"""The loopback ports `loadstage run` hands out: the kernel's pick by default, or a range of the user's
(LOADSTAGE_LOCAL_PORTS) taken in turn, skipping any port that is in use, with a clear error for a bad range."""

import os
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadstage.api.load import parse_experiment
from loadstage.engine.errors import ExperimentFailed
from loadstage.local import ports
from loadstage.local.ports import PORTS_ENV, PortRangeError, free_port, port_free, port_range
from loadstage.local.target import local_problems


def test_without_a_range_the_kernel_picks_a_port_nobody_holds(monkeypatch):
    monkeypatch.delenv(PORTS_ENV, raising=False)
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def this_workers_window(size):
    """`size` free ports in a row from this test worker's own range (tests/support/scheduling.py): no other
    process hands them out, and they are below the kernel's ephemeral ports, which any client may take."""
    own = port_range(os.environ[PORTS_ENV])
    return next(range(low, low + size) for low in own if all(port_free(p) for p in range(low, low + size)))


def test_a_range_is_taken_in_turn_and_a_port_in_use_is_skipped(monkeypatch):
    monkeypatch.setattr(ports, "_turns", {})
    window = this_workers_window(5)
    with socket.socket() as held:
        held.bind(("127.0.0.1", window[2]))
        monkeypatch.setenv(PORTS_ENV, f"{window[0]}-{window[-1]}")
        given_out = [free_port() for _ in range(8)]
    assert sorted(given_out[:4]) == [window[0], window[1], window[3], window[4]]    # each free port once
    assert given_out[4:] == given_out[:4]                                           # then again, in turn


def test_a_range_with_every_port_in_use_is_named(monkeypatch):
    monkeypatch.setattr(ports, "_turns", {})
    (taken,) = this_workers_window(1)
    with socket.socket() as held:
        held.bind(("127.0.0.1", taken))
        monkeypatch.setenv(PORTS_ENV, f"{taken}-{taken}")
        with pytest.raises(ExperimentFailed, match=f"^{PORTS_ENV}={taken}-{taken}: every port in it is in use$"):
            free_port()


@pytest.mark.parametrize("text", ["", "30000", "30000-", "-30000", "a-b", "30010-30000", "80-90", "30000-70000",
                                  "1e4-2e4", "+1-5"])
def test_a_malformed_range_is_refused_before_the_run_naming_the_variable_and_the_rule(text, monkeypatch, base_doc):
    monkeypatch.setenv(PORTS_ENV, text)
    problems = local_problems(parse_experiment(base_doc))
    if text:
        assert problems == [(PORTS_ENV, f"must be LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, not {text!r}")]
    else:
        assert problems == []       # unset or empty: the kernel picks


@given(st.text(max_size=20))
def test_any_text_is_a_valid_range_or_a_named_error(text):
    try:
        span = port_range(text)
    except PortRangeError as error:
        assert str(error).startswith("must be LOW-HIGH") and repr(text) in str(error)
    else:
        assert 1024 <= span.start <= span.stop - 1 <= 65535
