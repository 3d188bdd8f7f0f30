"""The live Prometheus series of a run (docs/live.md lists them):
- a stage's, from its Locust master's snapshot (loadstage.locust.live); the master serves them while its stage
  runs, and `loadstage run --metrics-port` serves every stage's for the whole run, a finished stage's counters
  at their final values;
- the target's CPU and memory and the Redis connections, as loadstage samples them during a stage;
- each experiment's phase, place and time left (the operator's, and `loadstage run`'s)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

RUN_LABELS = ("namespace", "experiment")
STAGE_LABEL_KEYS = ("experiment", "namespace", "variant", "settings", "repeat", "stage")


def stage_labels(*, experiment: str, namespace: str, variant: int, settings: str, repeat: int,
                 stage: int | None) -> dict[str, str]:
    """A stage's labels; a warm-up's stage is "warmup"."""
    return {"experiment": experiment, "namespace": namespace, "variant": str(variant), "settings": settings,
            "repeat": str(repeat), "stage": "warmup" if stage is None else str(stage)}


def stage_families(stages: Iterable[tuple[dict[str, Any], dict[str, str], bool]]) -> Iterator[Metric]:
    """Each (snapshot, labels, running) stage's series, one family per name; a finished stage keeps only its
    counters."""
    stages = list(stages)
    keys = list(STAGE_LABEL_KEYS)
    requests = CounterMetricFamily("loadstage_stage_requests", "Requests completed in the stage.",
                                   labels=[*keys, "method", "name"])
    failures = CounterMetricFamily("loadstage_stage_failures", "Requests of the stage that failed.",
                                   labels=[*keys, "method", "name"])
    users = GaugeMetricFamily("loadstage_stage_users", "Locust users running.", labels=keys)
    injectors = GaugeMetricFamily("loadstage_stage_injectors", "Locust workers connected to the stage's master.",
                                  labels=keys)
    latency = GaugeMetricFamily("loadstage_stage_latency_seconds", "Response time quantiles of the requests of "
                                "the last 10 s, from the injectors' merged histograms.", labels=[*keys, "quantile"])
    cpu = GaugeMetricFamily("loadstage_injector_cpu_ratio", "Each injector's CPU, as it last reported (1.0: one "
                            "core).", labels=[*keys, "injector"])
    started = GaugeMetricFamily("loadstage_stage_started_timestamp_seconds", "When the stage's load started "
                                "(Unix time).", labels=keys)
    for snapshot, labels, running in stages:
        values = [labels[k] for k in keys]
        for method, name, count, failed in snapshot.get("endpoints", ()):
            requests.add_metric([*values, method, name], count)
            failures.add_metric([*values, method, name], failed)
        if not running:
            continue
        users.add_metric(values, snapshot.get("users", 0))
        injectors.add_metric(values, snapshot.get("workers", 0))
        for quantile, seconds in (snapshot.get("latencySeconds") or {}).items():
            latency.add_metric([*values, quantile], seconds)
        for who, percent in (snapshot.get("injectorCpuPercent") or {}).items():
            cpu.add_metric([*values, who], percent / 100.0)
        if snapshot.get("startedAt") is not None:
            started.add_metric(values, snapshot["startedAt"])
    yield from (requests, failures, users, injectors, latency, cpu, started)


def target_samples(resources: tuple[float, int] | None, redis_connections: int | None) -> dict[str, Any]:
    """The samplers' latest figures, as target_families reads them: resources are (CPU cores, memory bytes)."""
    cpu, memory = resources or (None, None)
    return {"cpu_cores": cpu, "memory_bytes": memory, "redis_connections": redis_connections}


def target_families(stages: Iterable[tuple[dict[str, str], dict[str, Any]]]) -> Iterator[Metric]:
    """Each running (labels, samples) stage's latest samples (cpu_cores, memory_bytes, redis_connections);
    a figure loadstage could not sample is left out."""
    keys = list(STAGE_LABEL_KEYS)
    families = {key: GaugeMetricFamily(name, documentation, labels=keys) for key, name, documentation in (
        ("cpu_cores", "loadstage_target_cpu_cores", "The target's CPU, in cores (its server, not its proxy)."),
        ("memory_bytes", "loadstage_target_memory_bytes", "The target's memory (its server, not its proxy)."),
        ("redis_connections", "loadstage_redis_connections", "Clients connected to Redis, less the sampler."))}
    for labels, samples in stages:
        for key, family in families.items():
            if samples.get(key) is not None:
                family.add_metric([labels[k] for k in keys], samples[key])
    yield from families.values()


def experiment_families(runs: Iterable[tuple[str, str, dict[str, Any]]], at: dt.datetime) -> Iterator[Metric]:
    """Each (namespace, experiment, status): its phase and place, the seconds since it started and the seconds
    it has left (counting down from the ETA of its last status write)."""
    info = GaugeMetricFamily("loadstage_experiment_info", "The experiment's phase and where it is (always 1).",
                             labels=[*RUN_LABELS, "phase", "variant", "repeat", "stage"])
    elapsed = GaugeMetricFamily("loadstage_experiment_elapsed_seconds", "Seconds since the run started.",
                                labels=list(RUN_LABELS))
    remaining = GaugeMetricFamily("loadstage_experiment_remaining_seconds", "Seconds the run has left (its ETA).",
                                  labels=list(RUN_LABELS))
    for namespace, name, status in runs:
        progress = status.get("progress") or {}
        info.add_metric([namespace, name, status.get("phase", ""), progress.get("variant", ""),
                         progress.get("repeat", ""), progress.get("stage", "")], 1)
        if status.get("startedAt"):
            end = _time(status["finishedAt"]) if status.get("finishedAt") else at
            elapsed.add_metric([namespace, name], max(0.0, (end - _time(status["startedAt"])).total_seconds()))
        if progress.get("eta"):
            left = 0.0 if status.get("finishedAt") else (_time(progress["eta"]) - at).total_seconds()
            remaining.add_metric([namespace, name], max(0.0, left))
    yield from (info, elapsed, remaining)


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))

