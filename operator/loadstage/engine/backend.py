"""What the engine asks of a backend, and an adapter for a backend whose calls block."""

from __future__ import annotations

from typing import Any, Protocol

from loadstage.api.types import Variant
from loadstage.engine.steps import Step
from loadstage.results.measurement import StageMeasurement


class Backend(Protocol):
    async def prepare_variant(self, variant: Variant) -> None: ...
    async def run_stage(self, step: Step) -> StageMeasurement: ...
    async def finish_variant(self, variant: Variant) -> None: ...
    async def discard_stage(self, step: Step) -> None:
        """Removes what is left of a disrupted attempt of the step, before it runs again."""
    async def saved_artifacts(self, steps: list[Step]) -> list[dict[str, Any]]:
        """The artifacts of these finished stages, kept by an earlier run."""


class BlockingBackend:
    """A backend whose calls block, run in the event loop's own thread: one experiment per process."""

    def __init__(self, backend: Any):
        self.backend = backend

    async def prepare_variant(self, variant: Variant) -> None:
        self.backend.prepare_variant(variant)

    async def run_stage(self, step: Step) -> StageMeasurement:
        measured: StageMeasurement = self.backend.run_stage(step)
        return measured

    async def finish_variant(self, variant: Variant) -> None:
        self.backend.finish_variant(variant)

    async def discard_stage(self, step: Step) -> None:
        self.backend.discard_stage(step)

    async def saved_artifacts(self, steps: list[Step]) -> list[dict[str, Any]]:
        saved: list[dict[str, Any]] = self.backend.saved_artifacts(steps)
        return saved
