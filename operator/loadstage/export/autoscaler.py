"""An autoscaling/v2 HorizontalPodAutoscaler from measurements (docs/export.md, "The autoscaler"):

- C: a pod's capacity, the req/s it served at its capacity stage over its pods; L = C (1 - headroom), the load
  a pod is given before another is added;
- minReplicas = ceil(minLoad / L), maxReplicas = ceil(maxLoad / L);
- the CPU target: the CPU a pod used at C, scaled to L (CPU taken as proportional to the load), over its request;
- the headroom needed: the load's growth during a scale-up (the HPA's 15 s sync, metrics' 15 s resolution and
  the pod's time to ready) against the spare capacity of minReplicas pods, growth x (30 s + ready) / (min x C);
- its behavior: a scale-down removes at most one pod in the time it takes to bring one back (30 s + ready), after
  the HPA's usual 300 s of stabilisation, so that traffic that dips and returns finds its pods."""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadstage.api.quantities import cpu_cores
from loadstage.api.types import Autoscale

ANNOTATION = "loadstage.io/recommendation"   # where an exported object says where its numbers come from
SYNC_SECONDS = 15       # the HPA controller's period (--horizontal-pod-autoscaler-sync-period)
METRICS_SECONDS = 15    # metrics-server's resolution
SCALE_DOWN_WINDOW_SECONDS = 300   # the HPA's default
MAX_PERIOD_SECONDS = 1800         # the most a scaling policy's period may be
WEAK_PROXY = 0.5        # a pod at capacity using less of its request than this: CPU is not what limits it


@dataclass(frozen=True)
class Autoscaler:
    min_replicas: int
    max_replicas: int
    cpu_target_percent: int
    cpu_request: str            # the request the target percentage is of
    per_pod: float              # C, req/s
    per_pod_cpu: float          # cores at C
    headroom_needed: float | None
    notes: tuple[str, ...]

    def lines(self, asked: Autoscale) -> list[str]:
        load = self.per_pod * (1 - asked.headroom)
        said = [f"a pod serves {self.per_pod:g} req/s at its capacity, using {self.per_pod_cpu:g} cores; with "
                f"{asked.headroom:.0%} headroom it is given {load:.4g} req/s",
                f"{asked.min_load:g} to {asked.max_load:g} req/s: {self.min_replicas} to {self.max_replicas} "
                f"replicas, CPU target {self.cpu_target_percent}% of {self.cpu_request}"]
        if self.headroom_needed is not None:
            enough = "enough" if self.headroom_needed <= asked.headroom else \
                f"too little: give --headroom {math.ceil(self.headroom_needed * 100)}%"
            said.append(f"the load rising {asked.growth:g} req/s a second while a pod is added "
                        f"({return_seconds(asked):g} s) needs "
                        f"{self.headroom_needed:.1%} headroom: {enough}")
        return said + list(self.notes)


def derive(asked: Autoscale, per_pod: float, per_pod_cpu: float, cpu_request: str | None) -> Autoscaler:
    """`cpu_request`: the pods' CPU request as run (None: the run set none, and one is recommended: the CPU at
    capacity, rounded up to 10m)."""
    load = per_pod * (1 - asked.headroom)
    notes = []
    if cpu_request is None:
        cpu_request = f"{math.ceil(per_pod_cpu * 100) * 10}m"
        notes.append(f"the run set no CPU request: {cpu_request} (the CPU a pod used at its capacity)")
    request = cpu_cores(cpu_request)
    if per_pod_cpu < WEAK_PROXY * request:
        notes.append(f"at its capacity a pod used {per_pod_cpu / request:.0%} of its CPU request: its CPU is not "
                     f"what limits it (see its limitedBy), so CPU is a weak signal to scale on")
    minimum = max(1, math.ceil(asked.min_load / load))
    needed = None if asked.growth is None else \
        asked.growth * return_seconds(asked) / (minimum * per_pod)
    return Autoscaler(minimum, max(minimum, math.ceil(asked.max_load / load)),
                      max(1, min(100, math.floor(100 * per_pod_cpu * (1 - asked.headroom) / request))),
                      cpu_request, round(per_pod, 2), round(per_pod_cpu, 3), needed, tuple(notes))


def return_seconds(asked: Autoscale) -> float:
    """How long a pod takes to come back once the load asks for it: the HPA's sync, metrics' resolution, ready."""
    return SYNC_SECONDS + METRICS_SECONDS + asked.ready_seconds


def hpa(name: str, scaler: Autoscaler, provenance: str, asked: Autoscale) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "annotations": {ANNOTATION: provenance}},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": scaler.min_replicas, "maxReplicas": scaler.max_replicas,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": scaler.cpu_target_percent}}}],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": SCALE_DOWN_WINDOW_SECONDS,
                                                "policies": [{"type": "Pods", "value": 1, "periodSeconds":
                                                              min(MAX_PERIOD_SECONDS,
                                                                  math.ceil(return_seconds(asked)))}]}}}}
