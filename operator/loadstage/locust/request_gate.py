"""ab-style load on an injector: a stage of `requests: N` and `keepAlive: false`.

Every request of Locust's HTTP sessions passes the gate before it is sent. With a request goal, each
injector owns a share of N (by its worker index) and sends exactly that many: a user that would send one
more stops instead (StopUser), so the stage makes N requests in all, not N plus those in flight. Without
keep-alive, every request asks the server to close its connection, so the next one opens a new one, as
ab does without -k."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from locust.exception import StopUser

CLOSE = {"Connection": "close"}


def share(goal: int, injectors: int, index: int) -> int:
    """The requests injector `index` (0-based) of `injectors` sends of a stage's `goal`."""
    index %= max(injectors, 1)
    return goal // injectors + (1 if index < goal % injectors else 0)


class RequestGate:
    def __init__(self) -> None:
        self.quota: int | None = None     # this injector's share; None: no request goal
        self.keep_alive = True
        self.sent = 0
        self.completed = 0
        self.on_done: Callable[[], None] | None = None   # called once, when the share has completed
        self._done = False

    def configure(self, *, goal: int, injectors: int, index: int, keep_alive: bool) -> None:
        self.quota = share(goal, injectors, index) if goal else None
        self.keep_alive = keep_alive
        self._check_done()

    @property
    def needed(self) -> bool:
        """Whether requests must pass the gate at all: a request goal, or no keep-alive."""
        return self.quota is not None or not self.keep_alive

    def admit(self, headers: dict | None) -> dict | None:
        """Before a request: StopUser once the share is sent; the headers to send it with."""
        if self.quota is not None:
            if self.sent >= self.quota:
                raise StopUser()
            self.sent += 1
        return headers if self.keep_alive else {**(headers or {}), **CLOSE}

    def note_completed(self, **_kwargs) -> None:
        self.completed += 1
        self._check_done()

    def _check_done(self) -> None:
        if self.quota is not None and self.completed >= self.quota and not self._done and self.on_done:
            self._done = True
            self.on_done()


def install(sessions: tuple[Any, ...], gate: RequestGate) -> None:
    """Routes every request of these session classes through the gate."""
    for session in sessions:
        send = session.request
        if getattr(send, "loadstage_gated", False):
            continue

        def gated(self, method, url, *args, __send=send, headers=None, **kwargs):
            headers = gate.admit(headers)
            return __send(self, method, url, *args, **({"headers": headers} if headers is not None else {}),
                          **kwargs)
        gated.loadstage_gated = True   # type: ignore[attr-defined]
        session.request = gated
