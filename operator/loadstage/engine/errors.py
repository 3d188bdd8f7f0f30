"""How a run ends early: the run was cancelled, or the experiment cannot go on."""

from __future__ import annotations


class Cancelled(Exception):
    """The run was asked to stop (a signal, a deleted resource, an operator shutting down)."""


class ExperimentFailed(Exception):
    """The experiment cannot go on; `reason` is CamelCase, the message says what and why."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message
