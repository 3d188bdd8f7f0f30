"""One stage's results, built on the Locust master when the stage ends.

Counts, means and maxima come from Locust's stats, which are exact; percentiles come from the
merged HDR histograms (loadstage.histograms). Two documents come out:
- the headline: totals, percentiles and the per-method rows. It is small enough for a Kubernetes
  termination message (4096 bytes) and is what the status holds;
- the artifact: every histogram (the stage's, each method's and each endpoint's), the endpoint and
  error rows, and the time series. It goes to a file locally and to a ConfigMap in a cluster."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hdrh.histogram import HdrHistogram

from loadstage.api.status import ExceptionCount, Latency, TaskExceptions
from loadstage.api.types import DROPPED_ARRIVALS_BOUND
from loadstage.api.wire import HEADLINE, METHOD_ROW, MethodRow, StageHeadline
from loadstage.locust.recorder import Row, StageRecorder
from loadstage.results import histograms

TERMINATION_MESSAGE_LIMIT = 4096
INJECTOR_BOUND_PERCENT = 90.0      # an injector above this measured itself, not the target
MASTER_BOUND_LAG_SECONDS = 3.0     # a master that merged a report this late was behind by a report interval
MAX_ERRORS = 50
TOP_EXCEPTIONS = 3      # the most frequent exception messages a stage's headline names
MAX_ENDPOINTS = 300     # request names with a row of their own; the rest are folded into one "(other)" row
OTHER = "(other)"


def _rows_of(recorded: dict[Row, Any], keys: Iterable[Row]):
    return [recorded[k] for k in keys if k in recorded]


def _figures(entries: list, raw: HdrHistogram, corrected: HdrHistogram | None) -> MethodRow:
    """requests, failures, meanMs and latencyMs (and correctedLatencyMs) of some Locust entries, from their
    merged histograms."""
    requests = sum(e.num_requests for e in entries)
    max_ms = max((e.max_response_time for e in entries if e.num_requests), default=None)
    row = MethodRow(
        requests=requests,
        failures=sum(e.num_failures for e in entries),
        meanMs=round(sum(e.total_response_time for e in entries) / requests, 3) if requests else None,
        latencyMs=Latency.from_status(histograms.latency_ms(raw, max_ms)),
    )
    if corrected is not None:
        row["correctedLatencyMs"] = Latency.from_status(histograms.latency_ms(corrected))
    return row


class _Merged:
    """The merged histogram of each selection of rows, merged once: a stage's rows are merged for its figures and
    again for its artifact, and the stage's own from its methods' (each row is in one method's)."""

    def __init__(self, recorded: dict[Row, Any], methods: dict[str, list[Row]]):
        self.recorded = recorded
        self.known: dict[tuple[Row, ...], HdrHistogram] = {}
        everything = [k for keys in methods.values() for k in keys]
        self.known[tuple(sorted(everything))] = histograms.merge(self.of(keys) for keys in methods.values())

    def of(self, selected: list[Row]) -> HdrHistogram:
        key = tuple(sorted(selected))
        if key not in self.known:
            self.known[key] = histograms.merge(_rows_of(self.recorded, selected))
        return self.known[key]


def build(stats, recorder: StageRecorder, **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(headline, artifact) of a stage, the headline as the master writes it (figures(), through its
    declaration)."""
    headline, artifact = figures(stats, recorder, **options)
    return HEADLINE.dump(headline, "headline"), artifact


def figures(stats, recorder: StageRecorder, *, injectors: int | None = None, served_requests: int | None = None,
            bound_percent: float = INJECTOR_BOUND_PERCENT, started: float | None = None
            ) -> tuple[StageHeadline, dict[str, Any]]:
    """(headline, artifact) of a stage. `stats` is the master's locust RequestStats; `bound_percent`: the
    injector CPU above which the stage is injector-bound; `started`: when the load began (epoch seconds), where
    that is after the test started (an arrival rate's pool is started first)."""
    entries = {(e.method, e.name): e for e in stats.entries.values() if e.num_requests or e.num_failures}
    total = stats.total
    began = max(started or total.start_time, total.start_time)
    end = total.last_request_timestamp or began
    elapsed = max(end - began, 1e-9) if total.num_requests else 0.0
    keys = sorted(entries, key=lambda k: (-entries[k].num_requests, k))
    methods = sorted({m for m, _ in keys})
    pacing = bool(recorder.corrected)
    counted = recorder.arrival_totals()
    arrived, dropped = counted or (0, 0)
    cpu_bound = (recorder.cpu_peak_percent or 0) > bound_percent

    by_method = {m: [k for k in keys if k[0] == m] for m in methods}
    raw, corrected = _Merged(recorder.raw, by_method), _Merged(recorder.corrected, by_method) if pacing else None

    def figures_of(selected: list[Row]) -> MethodRow:
        return _figures([entries[k] for k in selected], raw.of(selected),
                        corrected.of(selected) if corrected is not None and any(k in recorder.corrected
                                                                                for k in selected) else None)

    def row_of(selected: list[Row]) -> dict[str, Any]:
        row: dict[str, Any] = METHOD_ROW.dump(figures_of(selected), "row")
        return row

    headline: StageHeadline = {
        **figures_of(keys),   # type: ignore[typeddict-item]
        "rps": round(total.num_requests / elapsed, 2) if elapsed else 0.0,
        "elapsedSeconds": round(elapsed, 2),
        "loadStartedAt": round(began, 3),              # epoch seconds: the load began
        "loadEndedAt": round(end, 3),                  # epoch seconds: the last request completed
        "injectors": injectors,
        "servedRequests": served_requests,
        "injectorPeakCpuPercent": recorder.cpu_peak_percent,
        "injectorBound": cpu_bound or dropped > DROPPED_ARRIVALS_BOUND * arrived,
        "masterLagSeconds": None if recorder.merge_lag_peak is None else round(recorder.merge_lag_peak, 3),
        "masterBound": (recorder.merge_lag_peak or 0) > MASTER_BOUND_LAG_SECONDS,
        "byMethod": {m: figures_of(selected) for m, selected in by_method.items()},
        "errorKinds": len(stats.errors),
    }
    if counted is not None:   # injector-bound by its CPU, or by its pools (too many drops)
        headline["arrivals"], headline["droppedArrivals"], headline["injectorCpuBound"] = arrived, dropped, cpu_bound
    if recorder.exceptions:
        top = sorted(recorder.exceptions.items(), key=lambda item: (-item[1], item[0]))[:TOP_EXCEPTIONS]
        headline["exceptions"] = TaskExceptions(sum(recorder.exceptions.values()),
                                                tuple(ExceptionCount(said, count) for said, count in top))

    def histogram_fields(selected: list[Row]) -> dict[str, str]:
        fields = {"histogram": histograms.encode(raw.of(selected))}
        if corrected is not None:
            fields["correctedHistogram"] = histograms.encode(corrected.of(selected))
        return fields

    endpoints = [{"method": m, "name": n, **row_of([(m, n)]), **histogram_fields([(m, n)])}
                 for m, n in keys[:MAX_ENDPOINTS]]
    if folded := keys[MAX_ENDPOINTS:]:   # ungrouped names (/item/<id>): one row, its figures still exact
        headline["endpointsFolded"] = len(folded)
        endpoints.append({"method": "*", "name": OTHER, "folded": len(folded), **row_of(folded),
                          **histogram_fields(folded)})
    artifact: dict[str, Any] = {
        "histogramUnit": "ns",
        **histogram_fields(keys),
        "byMethod": {m: histogram_fields(selected) for m, selected in by_method.items()},
        "endpoints": endpoints,
        "errors": [{"method": err.method, "name": err.name, "error": str(err.error)[:500],
                    "occurrences": err.occurrences}
                   for err in sorted(stats.errors.values(), key=lambda x: -x.occurrences)][:MAX_ERRORS],
        "series": recorder.series,
    }
    if (blocks := recorder.blocks(elapsed)) is not None:
        artifact["blocks"] = blocks
    return headline, artifact
