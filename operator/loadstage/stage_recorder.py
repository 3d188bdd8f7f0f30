"""What the injectors record during a stage, and how the Locust master merges it.

Each injector records every request into a histogram per (method, name): the raw response time
and, with pacing, the time from the task's intended start as well. Every worker report carries the
histograms recorded since the previous one (then starts afresh) and the injector's peak CPU; the
master adds them up, so its histograms hold exactly every request of the stage. The master also
cuts a time series: requests and percentiles per window."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from . import histograms

REPORT_KEY = "loadstage"
WINDOW_SECONDS = 5.0
Row = tuple[str, str]   # (method, name)


def _add(into: dict[Row, HdrHistogram], key: Row, histogram: HdrHistogram) -> None:
    if key not in into:
        into[key] = histograms.new()
    into[key].add(histogram)


@dataclass
class StageRecorder:
    raw: dict[Row, HdrHistogram] = field(default_factory=dict)
    corrected: dict[Row, HdrHistogram] = field(default_factory=dict)
    cpu_peak_percent: float | None = None
    series: list[dict] = field(default_factory=list)
    _window: HdrHistogram = field(default_factory=histograms.new)
    _window_started: float = field(default_factory=time.time)
    _unsent_raw: dict[Row, HdrHistogram] = field(default_factory=dict)
    _unsent_corrected: dict[Row, HdrHistogram] = field(default_factory=dict)

    # -- an injector ----------------------------------------------------------------

    def record(self, method: str, name: str, response_ms: float, corrected_ms: float | None = None) -> None:
        """On a worker the samples wait for the next report; standalone they are final at once."""
        key = (method, name)
        histogram = self._unsent_raw.get(key)
        if histogram is None:
            histogram = self._unsent_raw[key] = histograms.new()
        histogram.record_value(histograms.to_ns(response_ms))
        if corrected_ms is not None:
            if key not in self._unsent_corrected:
                self._unsent_corrected[key] = histograms.new()
            self._unsent_corrected[key].record_value(histograms.to_ns(corrected_ms))

    def on_request(self, request_type: str, name: str, response_time: float, context: dict | None = None,
                   start_time: float | None = None, **_) -> None:
        """Locust's request event. With pacing, the context carries the task's intended start."""
        intended = context.get("loadstage_intended") if context else None
        corrected = None
        if intended is not None and start_time is not None:
            corrected = max(response_time, (start_time - intended) * 1000 + response_time)
        self.record(request_type, name, response_time, corrected)

    def note_cpu(self, percent: float) -> None:
        self.cpu_peak_percent = max(self.cpu_peak_percent or 0.0, percent)

    def report(self) -> dict:
        """What a worker adds to its report to the master: everything recorded since the last one."""
        data = {"raw": {f"{m} {n}": histograms.encode(h) for (m, n), h in self._unsent_raw.items()},
                "corrected": {f"{m} {n}": histograms.encode(h) for (m, n), h in self._unsent_corrected.items()},
                "cpuPeakPercent": self.cpu_peak_percent}
        self._unsent_raw, self._unsent_corrected = {}, {}
        return data

    def keep_unsent(self) -> None:
        """Standalone: what was recorded counts at once."""
        self._merge_rows(self._unsent_raw, self._unsent_corrected)
        self._unsent_raw, self._unsent_corrected = {}, {}

    # -- the master -----------------------------------------------------------------

    def merge_report(self, data: dict) -> None:
        def rows(encoded: dict[str, str]) -> dict[Row, HdrHistogram]:
            return {tuple(key.split(" ", 1)): histograms.decode(value) for key, value in encoded.items()}
        self._merge_rows(rows(data.get("raw", {})), rows(data.get("corrected", {})))
        if data.get("cpuPeakPercent") is not None:
            self.note_cpu(data["cpuPeakPercent"])

    def _merge_rows(self, raw: dict[Row, HdrHistogram], corrected: dict[Row, HdrHistogram]) -> None:
        for key, histogram in raw.items():
            _add(self.raw, key, histogram)
            self._window.add(histogram)
        for key, histogram in corrected.items():
            _add(self.corrected, key, histogram)

    def start_series(self, now: float | None = None) -> None:
        self._window, self._window_started = histograms.new(), time.time() if now is None else now

    def cut_window(self, now: float | None = None) -> None:
        """Closes the current window of the time series (requests arrived with reports in it)."""
        now = time.time() if now is None else now
        seconds = max(now - self._window_started, 1e-9)
        latency = histograms.latency_ms(self._window)
        self.series.append({"start": round(self._window_started, 3), "seconds": round(seconds, 3),
                            "requests": latency["n"], "rps": round(latency["n"] / seconds, 2),
                            "p50Ms": latency["p50"], "p99Ms": latency["p99"]})
        self._window, self._window_started = histograms.new(), now
