"""Active and standby operators: a coordination.k8s.io Lease elects the one process that runs
Kopf; the others wait, serving only their liveness endpoint.

The algorithm is client-go's: a standby takes the Lease only after it has seen the same
record, unrenewed, for a whole lease duration by its own clock (so clock skew does not
matter), and every write is guarded by the Lease's resourceVersion. The leader exits the
process when it cannot renew within the renew deadline, which is shorter than the lease
duration: an old leader has stopped writing before a new one can start."""

from __future__ import annotations

import datetime as dt
import http.server
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2

log = logging.getLogger("loadstage.leader")


def identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _micro_time(moment: float | None = None) -> str:
    return dt.datetime.fromtimestamp(moment or time.time(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElection:
    def __init__(self, api: client.ApiClient, namespace: str, name: str, holder: str, *,
                 lease_seconds: int = LEASE_SECONDS, renew_deadline: float = RENEW_DEADLINE_SECONDS,
                 retry: float = RETRY_SECONDS):
        self.leases = client.CoordinationV1Api(api)
        self.namespace, self.name, self.holder = namespace, name, holder
        self.lease_seconds, self.renew_deadline, self.retry = lease_seconds, renew_deadline, retry
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def _body(self, resource_version: str | None, transitions: int, acquired: str) -> Any:
        """A Lease, as a dict (the client sends it as it is)."""
        metadata = {"name": self.name, "namespace": self.namespace}
        if resource_version:
            metadata["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_seconds,
                         "acquireTime": acquired, "renewTime": _micro_time(), "leaseTransitions": transitions}}

    def acquire(self, stopped: threading.Event) -> bool:
        """Blocks until this process holds the Lease (True) or `stopped` is set (False)."""
        observed, observed_at, said = None, time.monotonic(), None
        while not stopped.is_set():
            try:
                lease: Any = self.leases.read_namespaced_lease(self.name, self.namespace)
            except ApiException as e:
                if e.status != 404:
                    raise
                try:
                    self.leases.create_namespaced_lease(self.namespace, self._body(None, 0, _micro_time()))
                    return True
                except ApiException as e:
                    if e.status != 409:
                        raise
                    continue
            spec = lease.spec
            record = (spec.holder_identity, spec.renew_time, lease.metadata.resource_version)
            if record != observed:
                observed, observed_at = record, time.monotonic()
            expired = time.monotonic() - observed_at >= (spec.lease_duration_seconds or self.lease_seconds)
            if not spec.holder_identity or spec.holder_identity == self.holder or expired:
                transitions = (spec.lease_transitions or 0) + (spec.holder_identity != self.holder)
                try:
                    self.leases.replace_namespaced_lease(self.name, self.namespace, self._body(
                        lease.metadata.resource_version, transitions, _micro_time()))
                    return True
                except ApiException as e:
                    if e.status != 409:
                        raise
            elif said != spec.holder_identity:
                said = spec.holder_identity
                log.info("standby: Lease %s/%s is held by %s", self.namespace, self.name, said)
            stopped.wait(self.retry)
        return False

    def _renew_once(self) -> bool:
        lease: Any = self.leases.read_namespaced_lease(self.name, self.namespace)
        if lease.spec.holder_identity != self.holder:
            return False
        lease.spec.renew_time = dt.datetime.now(dt.UTC)
        self.leases.replace_namespaced_lease(self.name, self.namespace, lease)
        return True

    def keep(self, on_lost: Callable[[str], None]) -> None:
        """Renews the Lease every `retry` seconds in a thread; calls on_lost once it is lost."""
        def renew() -> None:
            renewed = time.monotonic()
            while not self._stop.wait(self.retry):
                try:
                    if not self._renew_once():
                        return on_lost("another operator holds the Lease")
                    renewed = time.monotonic()
                except Exception as e:
                    log.warning("could not renew the Lease: %s", e)
                if time.monotonic() - renewed > self.renew_deadline:
                    return on_lost(f"not renewed for {self.renew_deadline:g}s")
        self._renewer = threading.Thread(target=renew, name="lease-renewer", daemon=True)
        self._renewer.start()

    def release(self) -> None:
        """Gives the Lease up at a clean shutdown, so a standby takes over at once."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        try:
            lease: Any = self.leases.read_namespaced_lease(self.name, self.namespace)
            if lease.spec.holder_identity == self.holder:
                lease.spec.holder_identity = ""
                lease.spec.lease_duration_seconds = 1
                self.leases.replace_namespaced_lease(self.name, self.namespace, lease)
        except ApiException as e:
            log.warning("could not release the Lease: %s", e)


class StandbyHealth:
    """The liveness endpoint of a standby, which runs no Kopf yet."""

    def __init__(self, address: str, port: int):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                code = 200 if self.path == "/healthz" else 404
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"standby\n" if code == 200 else b"")

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer((address, port), Handler)
        threading.Thread(target=self.server.serve_forever, name="standby-health", daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
