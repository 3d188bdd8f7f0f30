"""spec.injectors.onLost, for both backends: an injector that dies, is deleted or is evicted mid-stage
fails the stage (Fail), or is recorded once and the stage goes on with the others (Continue)."""

from __future__ import annotations

from typing import Any

from loadstage.engine.clock import now
from loadstage.engine.errors import ExperimentFailed
from loadstage.engine.steps import Step


class LostInjectors:
    """The injectors a stage has lost so far, in the order they were lost."""

    def __init__(self, policy: str, step: Step, before: dict[str, dict[str, Any]] | None = None):
        self.policy, self.step = policy, step
        self._lost: dict[str, dict[str, Any]] = dict(before or {})   # kept by an earlier operator

    def __contains__(self, name: str) -> bool:
        return name in self._lost

    def lose(self, name: str, cause: str, *, described: str | None = None, detail: str = "") -> str:
        """Records injector `name` as lost, and returns what to say of it; under Fail, raises instead.
        `described` names it in the message (default: the name); `detail` follows the cause on failure."""
        message = f"{self.step.label()}: {described or name} {cause}"
        if self.policy == "Fail":
            raise ExperimentFailed("InjectorLost", message + detail)
        self._lost[name] = {"injector": name, "at": now(), "cause": cause}
        return message

    def entries(self) -> list[dict[str, Any]]:
        return list(self._lost.values())
