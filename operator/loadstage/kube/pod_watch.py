"""The pods of every LoadExperiment in a namespace, kept by one watch thread per namespace: listed
once, then watched from the last resourceVersion (relisted only on 410 Gone), so however many
experiments wait and however many pods change, a namespace costs one request per WATCH_SECONDS.
Experiments wait on it in the event loop, without a thread of their own. Pods are plain dicts,
as the API server sends them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.watch.watch import iter_resp_lines

from loadstage.api.names import LABEL_EXPERIMENT
from loadstage.engine.errors import Cancelled
from loadstage.kube.pods import Pod

WATCH_SECONDS = 290     # under the API server's default --min-request-timeout spread (300-600 s)
RETRY_SECONDS = 5
WAKE_SECONDS = 1.0      # how soon a waiter sees its stop flag
DELETED_KEPT = 4096     # deleted pods remembered, by experiment: the latest
T = TypeVar("T")
log = logging.getLogger(__name__)


class _Expired(Exception):
    """410 Gone: the resourceVersion is too old to resume from; list again."""


class NamespacePods:
    """Every pod labelled with an experiment in one namespace, by experiment."""

    def __init__(self, core: client.CoreV1Api, namespace: str, loop: asyncio.AbstractEventLoop):
        self.core, self.namespace, self.loop = core, namespace, loop
        self._lock = threading.Lock()
        self._pods: dict[str, dict[str, Pod]] = {}
        self._deleted: dict[str, OrderedDict[str, Pod]] = {}
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self.version: str | None = None
        self.listed = False
        self.failure: BaseException | None = None   # the last list or watch error, until one succeeds
        threading.Thread(target=self._run, name=f"pods-{namespace}", daemon=True).start()

    def snapshot(self, experiment: str, labels: dict[str, str]) -> dict[str, Pod]:
        with self._lock:
            return _matching(self._pods.get(experiment, {}), labels)

    def deleted(self, experiment: str, labels: dict[str, str]) -> dict[str, Pod]:
        """The experiment's pods with these labels deleted since the watch began: their metadata only."""
        with self._lock:
            return _matching(self._deleted.get(experiment, {}), labels)

    async def until(self, experiment: str, labels: dict[str, str], check: Callable[[dict[str, Pod]], T | None],
                    stopped, timeout: float | None = None) -> T | None:  # noqa: ASYNC109 (a wait, not a deadline)
        """The first non-None check(pods) of the experiment's pods with these labels (a value may list
        several, comma-separated), evaluated now and after every change; None after `timeout` seconds.
        Raises Cancelled when `stopped` is set, and the watch's error while it cannot list or watch."""
        deadline = None if timeout is None else time.monotonic() + timeout
        changed = asyncio.Event()
        self._waiters.setdefault(experiment, set()).add(changed)
        try:
            while True:
                changed.clear()
                if self.failure is not None:
                    raise self.failure
                if self.listed:
                    result = check(self.snapshot(experiment, labels))
                    if result is not None:
                        return result
                if stopped.is_set():
                    raise Cancelled()
                remaining = WAKE_SECONDS if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(WAKE_SECONDS, remaining))
        finally:
            self._waiters[experiment].discard(changed)

    def _wake(self, experiments: set[str] | None) -> None:
        for experiment in self._waiters if experiments is None else experiments:
            for changed in self._waiters.get(experiment, ()):
                changed.set()

    def _changed(self, experiments: set[str] | None) -> None:
        """Wakes the waiters of these experiments (None: all) in the event loop."""
        with contextlib.suppress(RuntimeError):   # the loop is closed: the operator is exiting
            self.loop.call_soon_threadsafe(self._wake, experiments)

    def _run(self) -> None:
        while not self.loop.is_closed():
            try:
                if self.version is None:
                    self._list()
                self._watch()
                self.failure = None
            except _Expired:
                self.version = None
            except Exception as e:
                if self.failure is None:
                    log.warning("watching pods in %s: %s; retrying every %ds", self.namespace, e, RETRY_SECONDS)
                self.failure = e
                self._changed(None)
                time.sleep(RETRY_SECONDS)

    def _list(self) -> None:
        response: Any = self.core.list_namespaced_pod(self.namespace, label_selector=LABEL_EXPERIMENT,
                                                      _preload_content=False)   # the raw response: JSON, not models
        listed = json.loads(response.data)
        pods: dict[str, dict[str, Pod]] = {}
        for pod in listed["items"]:
            pods.setdefault(pod["metadata"]["labels"][LABEL_EXPERIMENT], {})[pod["metadata"]["name"]] = pod
        with self._lock:
            touched = set(self._pods) | set(pods)
            for experiment, known in self._pods.items():   # deleted while the watch was away
                for name in known.keys() - pods.get(experiment, {}).keys():
                    self._remember_deleted(known[name])
            self._pods = pods
            self.version = listed["metadata"]["resourceVersion"]
            self.listed = True
            self.failure = None
        self._changed(touched)

    def _watch(self) -> None:
        response: Any = self.core.list_namespaced_pod(   # the raw stream of events
            self.namespace, label_selector=LABEL_EXPERIMENT, watch=True, resource_version=self.version,
            allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS, _preload_content=False,
            _request_timeout=(10, WATCH_SECONDS + 15))
        try:
            for line in iter_resp_lines(response):
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired()
                    raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                self.failure = None
                if kind != "BOOKMARK":
                    self._apply(kind, obj)
                self.version = obj["metadata"]["resourceVersion"]
        finally:
            response.close()
            response.release_conn()

    def _apply(self, kind: str, pod: Pod) -> None:
        experiment, name = pod["metadata"]["labels"][LABEL_EXPERIMENT], pod["metadata"]["name"]
        with self._lock:
            pods = self._pods.setdefault(experiment, {})
            if kind == "DELETED":
                pods.pop(name, None)
                self._remember_deleted(pod)
            else:
                pods[name] = pod
        self._changed({experiment})

    def _remember_deleted(self, pod: Pod) -> None:
        meta = pod["metadata"]
        deleted = self._deleted.setdefault(meta["labels"][LABEL_EXPERIMENT], OrderedDict())
        deleted[meta["name"]] = {"metadata": {k: meta[k] for k in ("name", "labels", "ownerReferences") if k in meta}}
        if len(deleted) > DELETED_KEPT:
            deleted.popitem(last=False)


def _matching(pods: dict[str, Pod], labels: dict[str, str]) -> dict[str, Pod]:
    """A label's value may list several, comma-separated."""
    return {name: pod for name, pod in pods.items()
            if all(pod["metadata"]["labels"].get(k) in v.split(",") for k, v in labels.items())}


class PodWatches:
    """One NamespacePods per namespace, started when an experiment there first waits."""

    def __init__(self, core: client.CoreV1Api):
        self.core = core
        self._namespaces: dict[str, NamespacePods] = {}

    def __call__(self, namespace: str) -> NamespacePods:
        if namespace not in self._namespaces:
            self._namespaces[namespace] = NamespacePods(self.core, namespace, asyncio.get_running_loop())
        return self._namespaces[namespace]
