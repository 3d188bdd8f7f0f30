"""How a run ends early: the run was cancelled, the experiment cannot go on, or a stage was disrupted and
may run again."""

from __future__ import annotations


class Cancelled(Exception):
    """The run was asked to stop (a signal, a deleted resource, an operator shutting down)."""


class ExperimentFailed(Exception):
    """The experiment cannot go on; `reason` is CamelCase, the message says what and why."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class StageDisrupted(Exception):
    """The stage's pods were taken away (evicted, preempted, deleted, their node lost), or the Redis that
    loadstage deployed was lost (reason RedisLost): nothing the experiment did, so the stage may run again from
    scratch under spec.stageRetries; with none left, the experiment fails with `reason`."""

    def __init__(self, cause: str, reason: str = "StageDisrupted"):
        super().__init__(cause)
        self.cause, self.reason = cause, reason
