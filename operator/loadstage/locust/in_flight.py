"""An open model's requests in flight, so that a look can count them (results.judgement.with_in_flight): each
injector keeps when each busy user's request began (its task's start, then each completed request's end) and sends
their ages with every report; the master keeps each worker's latest reports and ages them back to a look's
instant."""

from __future__ import annotations

from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

from loadstage.results import histograms

KEPT = 4   # of each worker's latest reports, on the master


@dataclass
class InFlight:
    busy: dict[int, float] = field(default_factory=dict)    # on an injector: user -> its request's start (epoch)
    reports: dict[str, list[tuple[float, list[int]]]] = field(default_factory=dict)   # on the master, by worker

    # -- an injector ----------------------------------------------------------------

    def started(self, user: int, at: float) -> None:
        """A user began a task at `at` (epoch seconds): in flight until it ends (ended)."""
        self.busy[user] = at

    def ended(self, user: int) -> None:
        self.busy.pop(user, None)

    def completed(self, user: int | None, at: float) -> None:
        """One of a busy user's requests completed: the task's next one, if any, begins now."""
        if user in self.busy:
            self.busy[user] = at

    def ages(self, now: float) -> list[int]:
        """How long each request in flight has been, as a tally (ns) in its travelling form."""
        tally: dict[int, int] = {}
        for since in self.busy.values():
            if since <= now:
                histograms.tally(tally, histograms.to_ns((now - since) * 1000))
        return histograms.flat(tally)

    # -- the master -----------------------------------------------------------------

    def note(self, worker: str, sent: float, ages: list[int] | None) -> None:
        kept = self.reports.setdefault(worker, [])
        kept.append((sent, ages or []))
        del kept[:-KEPT]

    def at(self, instant: float) -> HdrHistogram:
        """The requests in flight at `instant` (epoch seconds), each as old as it was then: from each worker's first
        report after it, those already in flight then (a report before it cannot tell which of its requests
        completed by then; a request that completed between the instant and the report is in a later second)."""
        merged = histograms.new()
        for reports in self.reports.values():
            sent, pairs = next(((t, p) for t, p in reports if t >= instant), (None, []))
            if sent is None:
                continue
            shift = (sent - instant) * 1e9
            for index, count in zip(pairs[::2], pairs[1::2]):
                if (age := merged.get_value_from_index(index) - shift) > 0:   # its bucket's lowest value
                    merged.record_value(histograms.to_ns(age / 1e6), count)
        return merged
