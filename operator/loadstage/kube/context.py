"""What every part of the Kubernetes backend shares for one experiment: its namespace and API clients,
the owner its children get, how it says what it is waiting for, and whether it was asked to stop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from loadstage.api.types import Experiment
from loadstage.engine.errors import Cancelled

POLL_SECONDS = 1.0


class StopFlag:
    """Whether kopf's DaemonStopped or a threading.Event is set."""

    def __init__(self, flag: Any):
        self._flag = flag

    def is_set(self) -> bool:
        return bool(self._flag.is_set() if hasattr(self._flag, "is_set") else self._flag)


@dataclass
class ExperimentContext:
    experiment: Experiment
    namespace: str
    api: client.ApiClient
    owner_uid: str
    adopt: Callable[[dict], None]              # sets the owner reference (kopf.adopt)
    stopped: Any                               # kopf's DaemonStopped, a threading.Event, or a bool
    on_event: Callable[[str, str], None] = lambda reason, message: None
    on_message: Callable[[str], Awaitable[None]] | None = None
    poll: float = POLL_SECONDS
    core: client.CoreV1Api = field(init=False)
    apps: client.AppsV1Api = field(init=False)
    batch: client.BatchV1Api = field(init=False)
    custom: client.CustomObjectsApi = field(init=False)
    policy: client.PolicyV1Api = field(init=False)
    networking: client.NetworkingV1Api = field(init=False)
    autoscaling: client.AutoscalingV2Api = field(init=False)

    def __post_init__(self) -> None:
        self.stopped = StopFlag(self.stopped)
        self.core, self.apps = client.CoreV1Api(self.api), client.AppsV1Api(self.api)
        self.batch, self.custom = client.BatchV1Api(self.api), client.CustomObjectsApi(self.api)
        self.policy, self.networking = client.PolicyV1Api(self.api), client.NetworkingV1Api(self.api)
        self.autoscaling = client.AutoscalingV2Api(self.api)

    async def say(self, reason: str, message: str) -> None:
        """Into the status message and as an Event."""
        if self.on_message is not None:
            await self.on_message(message)
        self.on_event(reason, message)

    def check_stopped(self) -> None:
        if self.stopped.is_set():
            raise Cancelled()

    async def pause(self, seconds: float) -> None:
        self.check_stopped()
        await asyncio.sleep(seconds)
        self.check_stopped()
