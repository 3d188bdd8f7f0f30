"""What the injectors record during a stage, and how the Locust master merges it.

Each injector records every request into a tally per (method, name) (loadstage.results.histograms): the raw
response time and, with pacing, the time from the task's intended start as well. Every worker report carries
the tallies recorded since the previous one (then starts afresh), the injector's peak CPU and when it was
sent; the master adds them to its histograms, so these hold exactly every request of the stage, and keeps
how late it merged a report (masterLagSeconds: a master that cannot keep up falls behind).

The time series comes from histograms too: every request also goes into the histogram of the
second it completed in, on whichever injector made it; the master merges each second's histograms
from every worker, and once no report can still add to a second (reports come every 3 s) turns it
into a row of the series (requests, rate, p50, p99). Each closed second is kept compact (its encoded
histogram, mean, count and failures) until the stage ends, when the seconds are merged into the blocks
that the stage's confidence intervals resample (loadstage.results.intervals)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from loadstage.locust.in_flight import InFlight
from loadstage.results import histograms, intervals

REPORT_KEY = "loadstage"
WINDOW_SECONDS = 1.0
WINDOW_SETTLE_SECONDS = 10.0   # a window this old gets no more samples: it becomes a row of the series
Row = tuple[str, str]   # (method, name)
EXCEPTION_MESSAGE_CHARS = 160   # of a task's exception, as the status shows it


Tally = dict[int, int]        # count by bucket index
Flat = list[int]              # a tally as it travels


def _add(into: dict, key, pairs: Flat) -> None:
    if key not in into:
        into[key] = histograms.new()
    histograms.add_flat(into[key], pairs)


def _tally(into: dict, key, value_ns: int) -> None:
    if key not in into:
        into[key] = {}
    histograms.tally(into[key], value_ns)


def _flat(tallies: dict) -> dict:
    return {key: histograms.flat(t) for key, t in tallies.items()}


@dataclass
class StageRecorder:
    raw: dict[Row, HdrHistogram] = field(default_factory=dict)
    corrected: dict[Row, HdrHistogram] = field(default_factory=dict)
    cpu_peak_percent: float | None = None
    cpu_percent: float | None = None          # on an injector: its latest CPU sample
    worker_cpu: dict[str, float] = field(default_factory=dict)   # on the master: each worker's latest sample
    merge_lag_peak: float | None = None      # on the master: the latest any report was merged after it was sent
    series: list[dict] = field(default_factory=list)
    exceptions: dict[str, int] = field(default_factory=dict)   # raised by tasks: count by "Type: message"
    arrivals: dict[str, tuple[int, int]] = field(default_factory=dict)   # on the master: (arrived, dropped) by worker
    own_arrivals: tuple[int, int] | None = None   # on an injector with an arrival rate: (arrived, dropped) so far
    in_flight: InFlight = field(default_factory=InFlight)   # an open model's requests in flight
    _windows: dict[int, HdrHistogram] = field(default_factory=dict)
    _window_failures: dict[int, int] = field(default_factory=dict)
    _closed: list[list] = field(default_factory=list)   # per closed second: [encoded or None, mean ns, n, failed]
    _unsent_failures: dict[int, int] = field(default_factory=dict)
    _unsent_raw: dict[Row, Tally] = field(default_factory=dict)
    _unsent_corrected: dict[Row, Tally] = field(default_factory=dict)
    _unsent_windows: dict[int, Tally] = field(default_factory=dict)
    _unsent_exceptions: dict[str, int] = field(default_factory=dict)

    # -- an injector ----------------------------------------------------------------

    def record(self, method: str, name: str, response_ms: float, corrected_ms: float | None = None,
               at: float | None = None, failed: bool = False) -> None:
        """On a worker the samples wait for the next report; standalone they are final at once.
        `at` is when the request completed (epoch seconds; default now)."""
        key = (method, name)
        value = histograms.to_ns(response_ms)
        window = int((time.time() if at is None else at) // WINDOW_SECONDS)
        _tally(self._unsent_raw, key, value)
        _tally(self._unsent_windows, window, value)
        if failed:
            self._unsent_failures[window] = self._unsent_failures.get(window, 0) + 1
        if corrected_ms is not None:
            _tally(self._unsent_corrected, key, histograms.to_ns(corrected_ms))

    def on_request(self, request_type: str, name: str, response_time: float, context: dict | None = None,
                   start_time: float | None = None, exception: BaseException | None = None, **_) -> None:
        """Locust's request event. With pacing, the context carries the task's intended start."""
        intended = context.get("loadstage_intended") if context else None
        if context and "loadstage_user" in context:
            self.in_flight.completed(context["loadstage_user"], time.time())
        corrected = None
        if intended is not None and start_time is not None:
            corrected = max(response_time, (start_time - intended) * 1000 + response_time)
        self.record(request_type, name, response_time, corrected, failed=exception is not None)

    def on_user_error(self, user_instance, exception: BaseException, tb, **_) -> None:
        """Locust's user_error event: a task raised. Locust logs it and goes on; the stage counts it."""
        said = f"{type(exception).__name__}: {exception}"
        said = said if len(said) <= EXCEPTION_MESSAGE_CHARS else said[:EXCEPTION_MESSAGE_CHARS - 1] + "…"
        self._unsent_exceptions[said] = self._unsent_exceptions.get(said, 0) + 1

    def note_cpu(self, percent: float) -> None:
        self.cpu_percent = percent
        self.cpu_peak_percent = max(self.cpu_peak_percent or 0.0, percent)

    def report(self) -> dict:
        """What a worker adds to its report to the master: everything recorded since the last one."""
        sent = time.time()
        data = {"raw": {f"{m} {n}": histograms.flat(t) for (m, n), t in self._unsent_raw.items()},
                "corrected": {f"{m} {n}": histograms.flat(t) for (m, n), t in self._unsent_corrected.items()},
                "windows": {str(w): histograms.flat(t) for w, t in self._unsent_windows.items()},
                "windowFailures": {str(w): n for w, n in self._unsent_failures.items()},
                "exceptions": self._unsent_exceptions,
                "cpuPeakPercent": self.cpu_peak_percent, "cpuPercent": self.cpu_percent, "sentAt": sent}
        if self.own_arrivals is not None:
            data["arrivals"] = list(self.own_arrivals)
        if self.in_flight.busy:
            data["inFlight"] = self.in_flight.ages(sent)
        self._unsent_raw, self._unsent_corrected, self._unsent_windows, self._unsent_failures = {}, {}, {}, {}
        self._unsent_exceptions = {}
        return data

    def keep_unsent(self) -> None:
        """Standalone: what was recorded counts at once."""
        self._merge(_flat(self._unsent_raw), _flat(self._unsent_corrected), _flat(self._unsent_windows),
                    self._unsent_failures, self._unsent_exceptions)
        self._unsent_raw, self._unsent_corrected, self._unsent_windows, self._unsent_failures = {}, {}, {}, {}
        self._unsent_exceptions = {}

    # -- the master -----------------------------------------------------------------

    def merge_report(self, data: dict, worker: str | None = None) -> None:
        def rows(sent: dict[str, Flat]) -> dict[Row, Flat]:
            return {(key.split(" ", 1)[0], key.split(" ", 1)[1]): pairs for key, pairs in sent.items()}
        self._merge(rows(data.get("raw", {})), rows(data.get("corrected", {})),
                    {int(w): pairs for w, pairs in data.get("windows", {}).items()},
                    {int(w): n for w, n in data.get("windowFailures", {}).items()}, data.get("exceptions", {}))
        if data.get("cpuPeakPercent") is not None:
            self.note_cpu(data["cpuPeakPercent"])
        if worker is not None and data.get("cpuPercent") is not None:
            self.worker_cpu[worker] = data["cpuPercent"]
        if worker is not None and data.get("arrivals"):
            arrived, dropped = data["arrivals"]
            self.arrivals[worker] = (int(arrived), int(dropped))
        if data.get("sentAt") is not None:
            self.merge_lag_peak = max(self.merge_lag_peak or 0.0, time.time() - data["sentAt"])
        if worker is not None and data.get("sentAt") is not None:
            self.in_flight.note(worker, data["sentAt"], data.get("inFlight"))

    def arrival_totals(self) -> tuple[int, int] | None:
        """(arrived, dropped) over every injector: the workers' latest counts, or a standalone injector's own."""
        if self.arrivals:
            return sum(a for a, _ in self.arrivals.values()), sum(d for _, d in self.arrivals.values())
        return self.own_arrivals

    def _merge(self, raw: dict[Row, Flat], corrected: dict[Row, Flat], windows: dict[int, Flat],
               failures: dict[int, int], exceptions: dict[str, int]) -> None:
        for said, count in exceptions.items():
            self.exceptions[said] = self.exceptions.get(said, 0) + count
        for key, pairs in raw.items():
            _add(self.raw, key, pairs)
        for key, pairs in corrected.items():
            _add(self.corrected, key, pairs)
        for window, pairs in windows.items():
            if self._closed_already(window):
                self._late(window, histograms.flat_total(pairs))
            else:
                _add(self._windows, window, pairs)
        for window, failed in failures.items():
            if not self._closed_already(window):
                self._window_failures[window] = self._window_failures.get(window, 0) + failed

    def _closed_already(self, window: int) -> bool:
        return bool(self.series) and window * WINDOW_SECONDS < self.series[-1]["start"] + WINDOW_SECONDS

    def _late(self, window: int, requests: int) -> None:
        """Samples of a window already in the series (a report over 10 s late): counted, not in its percentiles
        (nor in the intervals' blocks)."""
        start = window * WINDOW_SECONDS
        row = next((r for r in self.series if r["start"] == start), None)
        if row is not None:
            row["requests"] += requests
            row["rps"] = round(row["requests"] / WINDOW_SECONDS, 2)

    def close_windows(self, before: float | None = None) -> None:
        """Turns every window that ended before `before` (epoch seconds; None: all) into a row of the
        series; a second without a request between two with requests is a row of zero."""
        for window in sorted(self._windows):
            if before is not None and (window + 1) * WINDOW_SECONDS > before:
                break
            if self.series:
                gap = round(self.series[-1]["start"] / WINDOW_SECONDS) + 1
                for empty in range(gap, window):
                    self.series.append(_row(empty, histograms.new()))
                    self._closed.append([None, 0.0, 0, self._window_failures.pop(empty, 0)])
            histogram = self._windows.pop(window)
            self.series.append(_row(window, histogram))
            self._closed.append([histograms.encode(histogram), histograms.mean_ns(histogram),
                                 histogram.get_total_count(), self._window_failures.pop(window, 0)])

    def recent(self, until: float, seconds: float) -> HdrHistogram:
        """Every request that completed in the `seconds` before `until` (epoch seconds), merged: settling
        windows and closed ones alike."""
        first, last = int((until - seconds) // WINDOW_SECONDS), int(until // WINDOW_SECONDS)
        merged = histograms.new()
        for window, histogram in self._windows.items():
            if first <= window < last:
                merged.add(histogram)
        for row, closed in zip(reversed(self.series), reversed(self._closed)):
            window = round(row["start"] / WINDOW_SECONDS)
            if window < first:
                break
            if window < last and closed[0]:
                merged.add(histograms.decode(closed[0]))
        return merged

    def blocks(self, elapsed: float | None = None) -> dict | None:
        """The closed seconds merged into blocks for the confidence intervals (loadstage.results.intervals):
        {seconds: the block length, correlationSeconds, histograms, failures, durations}; None for a stage
        too short for them. `elapsed`: how long the load really ran; the first and last seconds are partial,
        so the durations are scaled to add up to it."""
        return blocks_of(self._closed, elapsed)

    def blocks_before(self, before: float, started: float) -> dict | None:
        """A look at a running stage that started at `started`: the blocks of every second that ended before
        `before` (epoch seconds), the settling ones too, none of them closed; they last from `started` to the
        end of the last of them."""
        seconds = list(self._closed)
        last = round(self.series[-1]["start"] / WINDOW_SECONDS) if self.series else None
        for window in sorted(self._windows):
            if (window + 1) * WINDOW_SECONDS > before:
                break
            for empty in range(last + 1, window) if last is not None else ():
                seconds.append([None, 0.0, 0, self._window_failures.get(empty, 0)])
            histogram = self._windows[window]
            seconds.append([histograms.encode(histogram), histograms.mean_ns(histogram), histogram.get_total_count(),
                            self._window_failures.get(window, 0)])
            last = window
        return blocks_of(seconds, (last + 1) * WINDOW_SECONDS - started if last is not None else None)


def blocks_of(closed: list[list], elapsed: float | None) -> dict | None:
    """Closed seconds ([encoded histogram, mean ns, requests, failures] each) as the blocks of the intervals, with
    each second's mean latency beside them (secondMeans, for the trend)."""
    chosen = intervals.block_seconds([c[1] for c in closed], [c[2] for c in closed])
    if chosen is None:
        return None
    length, lag = chosen
    result: dict = {"seconds": length, "correlationSeconds": lag, "histograms": [], "failures": [],
                    "durations": [], "secondMeans": [round(c[1]) for c in closed],
                    "secondRequests": [c[2] for c in closed]}
    for start in range(0, len(closed), length):
        seconds = closed[start:start + length]
        merged = histograms.merge_encoded(c[0] for c in seconds if c[0])
        result["histograms"].append(histograms.encode(merged))
        result["failures"].append(sum(c[3] for c in seconds))
        result["durations"].append(len(seconds) * WINDOW_SECONDS)
    if elapsed:
        scale = elapsed / sum(result["durations"])
        result["durations"] = [round(d * scale, 3) for d in result["durations"]]
    return result


def _row(window: int, histogram: HdrHistogram) -> dict:
    latency = histograms.latency_ms(histogram)
    return {"start": round(window * WINDOW_SECONDS, 3), "seconds": WINDOW_SECONDS, "requests": latency["n"],
            "rps": round(latency["n"] / WINDOW_SECONDS, 2), "p50Ms": latency["p50"], "p99Ms": latency["p99"]}
