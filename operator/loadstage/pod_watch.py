"""The pods of one label selector, listed once and then kept current by watches that resume from
the last resourceVersion, so waiting costs one request per WATCH_SECONDS however many pods change,
and a thousand pods starting cost no re-list. Pods are plain dicts, as the API server sends them.

A watch blocks in a socket read; one shared thread shuts a watch's connection down when its
stop flag is set, so a stopped experiment lets go within a second."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Callable, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from .engine import Cancelled

WATCH_SECONDS = 290     # under the API server's default --min-request-timeout spread (300-600 s)
T = TypeVar("T")
Pod = dict[str, Any]


class _Interrupter:
    """One thread for every open watch of the process: shuts down those whose stop flag is set."""

    def __init__(self):
        self._lock = threading.Lock()
        self._open: dict[int, tuple[Any, Any]] = {}
        self._thread: threading.Thread | None = None

    def add(self, response, stopped) -> None:
        with self._lock:
            self._open[id(response)] = (response, stopped)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="watch-interrupter", daemon=True)
                self._thread.start()

    def remove(self, response) -> None:
        with self._lock:
            self._open.pop(id(response), None)

    def _loop(self) -> None:
        while True:
            time.sleep(0.5)
            with self._lock:
                stopped = [r for r, flag in self._open.values() if flag.is_set()]
            for response in stopped:
                try:
                    response.shutdown()
                except Exception:  # noqa: BLE001  already closed
                    pass


INTERRUPTER = _Interrupter()


class _Expired(Exception):
    """410 Gone: the resourceVersion is too old to resume from; list again."""


class PodSet:
    def __init__(self, core: client.CoreV1Api, namespace: str, selector: str, stopped):
        self.core, self.namespace, self.selector, self.stopped = core, namespace, selector, stopped
        self.pods: dict[str, Pod] = {}
        self.version: str | None = None

    def list(self) -> None:
        response = self.core.list_namespaced_pod(self.namespace, label_selector=self.selector,
                                                 _preload_content=False)
        listed = json.loads(response.data)
        self.pods = {p["metadata"]["name"]: p for p in listed["items"]}
        self.version = listed["metadata"]["resourceVersion"]

    def until(self, check: Callable[[dict[str, Pod]], T | None], timeout: float | None = None) -> T | None:
        """Lists if never listed, then returns the first non-None check(pods), evaluated now and after
        every change; None after `timeout` seconds. Raises Cancelled when the stop flag is set."""
        if self.version is None:
            self.list()
        deadline = None if timeout is None else time.monotonic() + timeout
        result = check(self.pods)
        while result is None:
            if self.stopped.is_set():
                raise Cancelled()
            remaining = WATCH_SECONDS if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                result = self._watch(check, min(WATCH_SECONDS, max(1, int(remaining))))
            except _Expired:
                self.list()
                result = check(self.pods)
        return result

    def _watch(self, check: Callable[[dict[str, Pod]], T | None], seconds: int) -> T | None:
        response = self.core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, watch=True, resource_version=self.version,
            allow_watch_bookmarks=True, timeout_seconds=seconds, _preload_content=False,
            _request_timeout=(10, seconds + 15))
        INTERRUPTER.add(response, self.stopped)
        try:
            for line in iter_resp_lines(response):
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired()
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                self.version = obj["metadata"]["resourceVersion"]
                if kind == "BOOKMARK":
                    continue
                if kind == "DELETED":
                    self.pods.pop(obj["metadata"]["name"], None)
                else:
                    self.pods[obj["metadata"]["name"]] = obj
                result = check(self.pods)
                if result is not None:
                    return result
        except Exception:
            if self.stopped.is_set():
                raise Cancelled() from None
            raise
        finally:
            INTERRUPTER.remove(response)
            response.close()
            response.release_conn()
        if self.stopped.is_set():
            raise Cancelled()
        return None
