"""Whether a pod's capacity holds as pods are added: where the run measured the chosen settings at more than one
pod count, each size's capacity per pod. Two sizes whose per-pod intervals do not overlap disagree: the
autoscaler is then sized from the lowest (a pod of a larger Deployment may serve less: a shared Redis, a
database, the node)."""

from __future__ import annotations

from loadstage.api.status import RunStatus
from loadstage.export.choice import Chosen, Evidence, evidence_of


def sizes(status: RunStatus, chosen: Chosen) -> list[Evidence]:
    """The chosen variant's evidence and that of each variant of the same settings at another pod count, by
    pods."""
    same = {k: v for k, v in chosen.record.settings.items() if k != "pods"}
    found = [chosen.evidence]
    for record in status.variants:
        if record.index == chosen.record.index or \
                {k: v for k, v in record.settings.items() if k != "pods"} != same:
            continue
        evidence = evidence_of(record)
        if evidence is not None and evidence.rps_per_pod is not None and \
                evidence.pods not in {e.pods for e in found}:
            found.append(evidence)
    return sorted(found, key=lambda e: e.pods)


def _disagree(a: Evidence, b: Evidence) -> bool:
    low, high = a.rps_interval_per_pod, b.rps_interval_per_pod
    return low is not None and high is not None and (low[1] < high[0] or high[1] < low[0])


def sized_from(status: RunStatus, chosen: Chosen) -> tuple[Evidence, list[str]]:
    """The evidence the autoscaler is sized from, and what the check found (nothing with one size)."""
    measured = sizes(status, chosen)
    if len(measured) < 2:
        return chosen.evidence, []

    def said(e: Evidence) -> str:
        bounds = e.rps_interval_per_pod
        return f"{e.rps_per_pod:.4g} req/s a pod at {e.pods} pod{'s' if e.pods != 1 else ''}" + \
            (f" [{bounds[0]:.4g}, {bounds[1]:.4g}]" if bounds else " (no interval)")
    each = "; ".join(said(e) for e in measured)
    if not any(_disagree(a, b) for i, a in enumerate(measured) for b in measured[i + 1:]):
        return chosen.evidence, [f"linear within the intervals: {each}"]
    lowest = min(measured, key=lambda e: e.rps_per_pod or 0.0)
    return lowest, [f"not linear: {each}; sized from the lowest, at {lowest.pods} pod"
                    f"{'s' if lowest.pods != 1 else ''}"]
