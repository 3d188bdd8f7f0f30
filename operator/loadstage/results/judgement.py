"""A stage's seconds held against spec.slo: at a look while it runs, and at its end.

The verdict is drawn from its settled seconds (results.steady: the settling seconds cut), each objective held
against its figure's interval (results.batch_means: a t-interval over batches of seconds whose means are not
autocorrelated; the error rate's at least the exact interval of its counts) with the tolerance slo.tolerance
around it (results.thresholds):
- Pass: every objective holds over its whole interval, and latency is not still climbing;
- Fail: an objective is broken over its whole interval; or, at the stage's end, latency was still climbing over
  its batches (reason Unsteady);
- Near: none broken, none undecided, and at least one decided to lie within the tolerance of its limit;
- Undecided: anything else.
A look never passes (nor finds Near) while latency climbs, nor before NEAR_LOOK_SECONDS of settled seconds where a
latency's figure is near its objective (within NEAR x its limit): the first seconds of a stage near saturation
are the best it will have, and a queue filling up shows its climb by then. A fail needs no wait: a transient only
flatters a stage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hdrh.histogram import HdrHistogram

from loadstage.api.status import Objective, Verdict
from loadstage.api.types import PERCENTILES, Slo
from loadstage.results import batch_means, histograms, intervals
from loadstage.results.intervals import blocks_from_artifact
from loadstage.results.steady import climbing, settled
from loadstage.results.thresholds import held, verdict_of

NEAR_LOOK_SECONDS = 30.0
NEAR = (0.5, 2.0)


def figures_of(section: dict[str, Any]) -> dict[str, float | None]:
    """The figures of a stage's blocks (results.intervals' keys: p50 ... p999 in ms, errorRate, rps), beside the
    intervals they are held with."""
    return _figures(histograms.merge_encoded(section["histograms"]), section)


def _figures(merged: HdrHistogram, section: dict[str, Any]) -> dict[str, float | None]:
    latency = histograms.latency_ms(merged)
    requests, seconds = merged.get_total_count(), sum(section["durations"])
    return {**{p: latency[p] for p in histograms.LEVELS}, "errorRate": sum(section["failures"]) / requests
            if requests else None, "rps": requests / seconds if seconds else None}


def judge(slo: Slo, section: dict[str, Any] | None, confidence: float, *, raised: int = 0, requests: int = 0,
          final: bool, settle_floor: float = 0) -> Verdict:
    """The verdict of a stage's blocks so far (`section`, as the Locust master records them) at `confidence`;
    `final`: the stage has ended (a climb then fails it). `raised`: the tasks that raised, each a failed request;
    `requests`: the stage's requests so far; `settle_floor`: seconds cut at least (results.steady.settled)."""
    if not section:
        return verdict_of(held(slo, {}, None), final=final, confidence=confidence)
    every = blocks_from_artifact(section)
    steady, cut = settled(section, settle_floor, slo.latency_limits_ms().values(), every)
    blocks = every[len(every) - len(steady["histograms"]):]   # the kept ones, decoded once
    batches = batch_means.batches_from(blocks, float(steady["seconds"]))
    figures, counted = {}, 0
    if steady["histograms"]:
        merged = histograms.merge_encoded(steady["histograms"])
        counted = merged.get_total_count()
        figures = _figures(merged, steady) if counted else {}
    found = intervals.with_exceptions(batch_means.intervals(batches, confidence), raised, requests)
    objectives = held(slo, figures, found, (sum(steady["failures"]) + raised, counted + raised))
    trend = climbing(batches.means if batches else batch_means.mean_latencies(blocks))
    verdict = verdict_of(objectives, climbing=trend, final=final, settle_seconds=cut,
                         batch_seconds=batches.seconds if batches else None,
                         batches=len(batches.batches) if batches else None, confidence=confidence)
    if not final and verdict.outcome in ("Pass", "Near") and sum(steady["durations"]) < NEAR_LOOK_SECONDS and \
            _near(objectives):
        return replace(verdict, passed=False, near=(), undecided=(
            f"a latency within [{NEAR[0]:g}, {NEAR[1]:g}] x its objective: not decided before "
            f"{NEAR_LOOK_SECONDS:.0f} s of settled load",))
    return verdict


def with_in_flight(slo: Slo, section: dict[str, Any] | None, in_flight: HdrHistogram) -> dict[str, Any] | None:
    """A look's blocks with the requests still in flight that are already slower than every latency objective,
    each as slow as its age, in the last block: a queue that grows cannot hide its slowest requests. A younger
    one is left out: its latency is unknown, and counted at its age it would flatter the stage."""
    limits = slo.latency_limits_ms().values()
    if not section or not section["histograms"] or not limits or in_flight.get_total_count() == 0:
        return section
    floor, older = histograms.to_ns(max(limits)), histograms.new()
    for item in in_flight.get_recorded_iterator():
        if (age := in_flight.get_lowest_equivalent_value(item.value_iterated_to)) >= floor:
            older.record_value(age, item.count_added_in_this_iter_step)
    if older.get_total_count() == 0:
        return section
    last = histograms.merge([histograms.decode(section["histograms"][-1]), older])
    return {**section, "histograms": [*section["histograms"][:-1], histograms.encode(last)],
            "inFlight": older.get_total_count()}


def _near(objectives: list[Objective] | tuple[Objective, ...]) -> bool:
    return any(o.value is not None and NEAR[0] * o.limit <= o.value <= NEAR[1] * o.limit
               for o in objectives if o.name in PERCENTILES)
