"""Which resource limited a stage, from its saturation signals: each signal's threshold, the order they are read in
(a resource earlier in ORDER starves those after it: threads waiting on a slow Redis or on a throttled CPU fill
every thread too), the sentence with the numbers, and what would move the knee."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from loadstage.api.quantities import cpu_cores, memory_bytes
from loadstage.api.servers import BY_NAME
from loadstage.api.status import StageResult
from loadstage.api.status.saturation import LimitedBy, Saturation
from loadstage.api.types import Variant

CPU_SHARE = 0.85         # of the CPU the target can use
THROTTLED_SHARE = 0.5    # of its CFS periods
CONCURRENCY_SHARE = 0.9  # requests in flight, of those it serves at once
BACKLOG_SHARE = 0.9      # of its listen queues' length
MEMORY_SHARE = 0.9       # of its memory limit
REDIS_CPU_SHARE = 0.85
REDIS_CLIENTS_SHARE = 0.9
CLIFF_RATIO = 2.0        # the broken figure at the fail end over its value at the pass end
ORDER = ("Injectors", "Memory", "Redis", "Cpu", "Backlog", "Concurrency")
REMEDIES = {
    "Injectors": "more injectors, or for dropped arrivals a larger pool each (injectors.maxUsersPerInjector): the "
                 "target was not yet the limit",
    "Memory": "a higher memory limit, or fewer worker processes a pod",
    "Redis": "a bigger Redis (CPU, maxclients) or fewer connections to it (a pool)",
    "Cpu": "more CPU (a higher limit) or more pods",
    "Backlog": "a longer listen backlog (spec.target.backlog), or more workers or threads to accept",
    "Concurrency": "more threads or workers (the CPU has room)",
    "Unknown": "no signal crossed its threshold: read the stage's saturation",
}


@dataclass(frozen=True)
class Counters:
    """A container's (or a cgroup's) counts so far: CFS periods in which it ran, of which throttled; processes the
    OOM killer killed."""
    periods: int
    throttled: int
    oom_kills: int

    def since(self, before: Counters) -> Counters:
        return Counters(self.periods - before.periods, self.throttled - before.throttled,
                        self.oom_kills - before.oom_kills)

    @staticmethod
    def summed(each: list[Counters]) -> Counters:
        return Counters(sum(c.periods for c in each), sum(c.throttled for c in each), sum(c.oom_kills for c in each))


def since_each(before: dict[str, Counters] | None, after: dict[str, Counters] | None) -> Counters | None:
    """What the pods counted between two reads, summed over those in both (a pod replaced meanwhile, or one whose
    container restarted and began again, left out); None without one."""
    if not before or not after:
        return None
    deltas = [after[pod].since(before[pod]) for pod in before.keys() & after.keys()]
    kept = [d for d in deltas if d.periods >= 0 and 0 <= d.throttled <= d.periods and d.oom_kills >= 0]
    return Counters.summed(kept) if kept else None


def machine_cores() -> int:
    return len(os.sched_getaffinity(0))


def share(used: float | None, of: float | None) -> float | None:
    return None if used is None or not of else round(used / of, 3)


def redis_cpu_share(cores: float | None, limit: str | None) -> float | None:
    """Redis's CPU, of its limit or of the one core its main thread can use."""
    return share(cores, min(1.0, cpu_cores(limit)) if limit else 1.0)


def capacities(variant: Variant) -> Saturation:
    """What the variant's target can use: CPU (per pod its limit, at most one core a worker process: the GIL),
    requests at once, memory."""
    per_pod = [c for c in (cpu_cores(variant.cpu) if variant.cpu else None, variant.workers) if c is not None]
    cpu = min(per_pod) * variant.pods if per_pod else None
    return Saturation(cpu_capacity_cores=None if cpu is None else round(cpu, 3),
                      concurrency=concurrency(variant),
                      memory_limit_bytes=memory_bytes(variant.memory) * variant.pods if variant.memory else None)


def concurrency(variant: Variant) -> int | None:
    """Requests served at once: pods x workers x threads; None for a green-thread worker class (no bound) or a
    target whose workers are its own."""
    entry = BY_NAME.get(variant.server)
    if entry is None or variant.workers is None or entry.green(variant.worker_class):
        return None
    threads = 1 if entry.one_at_a_time(variant.worker_class) else (variant.threads or 1)
    return variant.pods * variant.workers * threads


def completed(measured: Saturation, capacity: Saturation, stage: StageResult) -> Saturation:
    """The backend's signals (its cpu_capacity_cores: the machine's cores, where the pods share one), with the
    capacities, the CPU and memory the stage recorded, Little's law, the injectors' CPU, and what crossed."""
    target = stage.target
    in_flight = None if stage.rps is None or stage.mean_ms is None else round(stage.rps * stage.mean_ms / 1000, 2)
    cores = [c for c in (measured.cpu_capacity_cores, capacity.cpu_capacity_cores) if c is not None]
    done = replace(measured, cpu_capacity_cores=min(cores, default=None), concurrency=capacity.concurrency,
                   memory_limit_bytes=capacity.memory_limit_bytes,
                   cpu_cores=next((c for c in (measured.cpu_cores, target.mean_cpu_cores, target.peak_cpu_cores)
                                   if c is not None), None),
                   memory_bytes=target.peak_memory_bytes, in_flight=in_flight,
                   injector_cpu_share=None if stage.injector_peak_cpu_percent is None else
                   round(stage.injector_peak_cpu_percent / 100, 3))
    return replace(done, crossed=tuple(crossed(done, stage)))


def _cores(value: float) -> str:
    return f"{value:.2g} core" + ("" if value == 1 else "s")


def _said(resource: str, s: Saturation, stage: StageResult) -> str | None:
    """The resource's signals in words, or None where none was measured."""
    if resource == "Cpu" and (s.cpu_cores is not None or s.throttled_share is not None):
        of = f" of {_cores(s.cpu_capacity_cores)} ({s.cpu_share:.0%})" if s.cpu_share is not None and \
            s.cpu_capacity_cores else ""
        return ", ".join([*([f"CPU {s.cpu_cores:.2f}{of}"] if s.cpu_cores is not None else []),
                          *([f"{s.throttled_share:.0%} of periods throttled"] if s.throttled_share is not None
                            else [])])
    if resource == "Concurrency" and s.in_flight is not None:
        of = "" if s.concurrency is None else f" of {s.concurrency} at once"
        return f"{s.in_flight:.1f} requests in flight{of}"
    if resource == "Backlog" and s.backlog_peak is not None:
        of = "" if s.backlog_limit is None else f" of {s.backlog_limit}"
        dropped = "" if not s.listen_overflows else f", {s.listen_overflows:,} connections dropped"
        return f"listen queue {s.backlog_peak}{of}{dropped}"
    if resource == "Redis":
        said = [f"Redis CPU {s.redis_cpu_share:.0%}" if s.redis_cpu_share is not None else "",
                f"{s.redis_rejected:,} connections refused" if s.redis_rejected else "",
                f"{stage.redis_peak_connections} of {s.redis_max_clients} clients"
                if stage.redis_peak_connections is not None and s.redis_max_clients else "",
                f"{s.redis_usec_per_call:.0f} µs a command" if s.redis_usec_per_call is not None else ""]
        return ", ".join(x for x in said if x) or None
    if resource == "Memory" and s.memory_bytes is not None:
        of = "" if not s.memory_limit_bytes else f" of {s.memory_limit_bytes / 2**20:,.0f}"
        killed = f", {s.oom_kills} OOM kill(s)" if s.oom_kills else ""
        return f"memory {s.memory_bytes / 2**20:,.0f}{of} MiB{killed}"
    if resource == "Injectors":
        cpu = None if s.injector_cpu_share is None else f"busiest injector {s.injector_cpu_share:.0%} of a core"
        if not stage.injector_bound or stage.measured_its_injectors or not stage.arrivals:
            return cpu
        dropped = f"{(stage.dropped_arrivals or 0) / stage.arrivals:.1%} of arrivals dropped (no free user)"
        return ", ".join(x for x in (dropped, cpu) if x)
    return None


def crossed(s: Saturation, stage: StageResult) -> list[str]:
    """The resources whose signals crossed their thresholds, in ORDER."""
    def at_least(value: float | None, threshold: float) -> bool:
        return value is not None and value >= threshold
    failed = stage.verdict is not None and stage.verdict.outcome == "Fail"   # pools out: every user waited on it
    redis_clients = None if stage.redis_peak_connections is None or not s.redis_max_clients else \
        stage.redis_peak_connections / s.redis_max_clients
    backlog = None if s.backlog_peak is None or not s.backlog_limit else s.backlog_peak / s.backlog_limit
    found = {
        "Injectors": stage.injector_bound and (stage.measured_its_injectors or not failed),
        "Memory": bool(s.oom_kills) or at_least(s.memory_share, MEMORY_SHARE),
        "Redis": bool(s.redis_rejected) or at_least(s.redis_cpu_share, REDIS_CPU_SHARE) or
        at_least(redis_clients, REDIS_CLIENTS_SHARE),
        "Cpu": at_least(s.cpu_share, CPU_SHARE) or at_least(s.throttled_share, THROTTLED_SHARE),
        "Backlog": at_least(backlog, BACKLOG_SHARE),
        "Concurrency": at_least(s.concurrency_share, CONCURRENCY_SHARE),
    }
    return [r for r in ORDER if found[r]]


def limited_by(broke: StageResult, passed: StageResult | None, at: str) -> LimitedBy:
    """The resource that limited `broke`, the stage that broke the objective (at load `at`), and whether its
    figure jumped from `passed`, the highest stage below it that met it."""
    s = broke.saturation or Saturation()
    resources = crossed(s, broke)
    resource = resources[0] if resources else "Unknown"
    others = [said for r in ORDER if r != resource and (said := _said(r, s, broke))]
    first = _said(resource, s, broke)
    evidence = (f"{first} at {at}" + (f"; {', '.join(others[:3])}" if others else "")) if first else \
        f"nothing crossed its threshold at {at}: " + (", ".join(others) or "no signal was measured")
    return LimitedBy(resource, evidence, cliff(broke, passed), REMEDIES[resource])


def cliff(broke: StageResult, passed: StageResult | None) -> bool:
    """The broken objective's figure at least CLIFF_RATIO times its value at the pass end (a figure that rose from
    zero: a cliff too). Without a verdict's objectives, the p99."""
    if passed is None:
        return False
    figure = next((o for o in broke.verdict.objectives if o.holds is False), None) if broke.verdict else None
    if figure is None:
        high, low = broke.latency.p99, passed.latency.p99
    else:
        low_figure = next((o for o in passed.verdict.objectives if o.name == figure.name), None) \
            if passed.verdict else None
        if figure.name == "minRps" or low_figure is None:
            return False
        high, low = figure.value, low_figure.value
    if high is None or low is None:
        return False
    return high > 0 if low == 0 else high / low >= CLIFF_RATIO
