"""The results tables, as rows of formatted cells: one row per stage and variant, the headline row of
every variant over all its stages, the p99 of every stage per variant, and what each stage cost the target.
The terminal, Markdown and HTML reports render these rows. (It is over 300 lines because every table the reports
share is here, one function each, with the cell formats and footnotes they share.)"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet

from loadstage.api.quantities import cpu_cores
from loadstage.api.status import Intervals, Latency, MethodFigures, RunStatus, Saturation, StageResult, VariantRecord
from loadstage.api.status.figures import bounds_of
from loadstage.reports import significance
from loadstage.reports.significance import BEST

STAGE_COLUMNS = ["Injectors", "Users", "50th", "90th", "95th", "99th", "99.9th", "GETs avg", "GETs p99", "POSTs avg",
                 "POSTs p99", "Total Requests", "Redis peak"]
HEADLINE_COLUMNS = ["50th", "90th", "95th", "99th", "99.9th", "GETs avg", "POSTs avg", "Total Requests",
                    "Redis peak"]
RESOURCE_COLUMNS = ["Injectors", "Users", "Requests", "req/s", "Errors", "Error rate", "Target CPU (cores)",
                    "Target RSS (MiB)", "Redis peak"]
THIN_P999 = "*"
UNSTEADY = "†"
INJECTOR_BOUND = "‡"
RAISED = "§"
FOOTNOTES = {THIN_P999: "* p99.9 of fewer than 1,000 requests: it is close to the maximum and says little.",
             UNSTEADY: "† the target was not steady during the stage: a pod restarted, was taken away, or was out "
                       "of its Service (not ready); the stage does not count toward capacity.",
             INJECTOR_BOUND: "‡ injector-bound: an injector's CPU went over 90% (75% under ab- or wrk-style load: "
                             "a request goal, no keep-alive or no wait), or an arrival rate dropped over 1% of its "
                             "arrivals (no user of the pool was free); the stage measured the injectors, not the "
                             "target, and does not count toward capacity.",
             RAISED: "§ its tasks raised exceptions (Locust logs them and goes on): each counts as a failed request "
                     "in the error rate; the status names the most frequent (exceptions.top).",
             BEST: "^ the best variant by more than the noise: its difference from every other variant's, in the "
                   "same column or at the same stage, is significant, with 95% for the row's marks together (each "
                   "column at 99% where five are compared). With fewer than 3 repeats the noise is the run's own, "
                   "and separate runs on a busy machine vary more (BENCHMARKS.md (f))."}
MASTER_BEHIND_NOTE = ("master behind: the Locust master merged a worker's report more than a report interval (3 s) "
                      "after it was sent; reports still queued when the stage ended may be missing from its figures, "
                      "and a worker whose heartbeats queued may have been taken for lost. Use fewer request names or "
                      "fewer, larger injectors (BENCHMARKS.md (g)).")
Table = tuple[list[str], list[list[str]]]


def format_ms(value) -> str:
    """Milliseconds to 3 significant digits (the histograms' resolution), whole above 100."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _p999(latency: Latency) -> str:
    text = format_ms(latency.p999)
    return text + THIN_P999 if latency.p999_reliable is False else text


def percentiles(latency: Latency, best: AbstractSet[str] = frozenset()) -> list[str]:
    """p50..p99.9, each marked where it is significantly the best of its column (reports.significance)."""
    cells = [*(format_ms(v) for v in (latency.p50, latency.p90, latency.p95, latency.p99)), _p999(latency)]
    return [c + BEST if name in best else c for name, c in zip(significance.COMPARED, cells)]


def headline_marks(run: RunStatus) -> list[set[str]]:
    """For each variant with a row over all its stages, the percentiles in which it is significantly best (none
    where the variants ran different loads)."""
    shown = [(v, v.aggregate) for v in run.variants if v.aggregate]
    if not significance.same_loads(run):
        return [set() for _ in shown]
    return significance.best_columns([variant_label(run, v) for v, _ in shown], [a.latency for _, a in shown],
                                     [a.intervals for _, a in shown])


def stage_of(variant: VariantRecord, number: int) -> StageResult | None:
    return next((s for s in variant.stages if s.stage == number), None)


def marks_among(run: RunStatus, stages: list[StageResult | None]) -> list[set[str]]:
    """For each variant, the percentiles in which its stage of `stages` (one each, at one load) is significantly
    the best (one row's marks, in the stage table and the p99 pivot alike)."""
    if len(run.variants) < 2:
        return [set() for _ in run.variants]
    return significance.best_columns([variant_label(run, v) for v in run.variants],
                                     [s.latency if s else None for s in stages],
                                     [s.intervals if s else None for s in stages])


def stage_marks(run: RunStatus, variant: VariantRecord, stage: StageResult) -> set[str]:
    """Where `stage` is the best of every variant's stage at its load."""
    return marks_among(run, significance.counterparts(run, variant, stage))[run.variants.index(variant)]


def method_cell(by_method: dict[str, MethodFigures], method: str, figure: str) -> str:
    row = by_method.get(method)
    return format_ms(None if row is None else row.mean_ms if figure == "mean" else row.p99_ms)


def number(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def count(value) -> str:
    return number(value, ",")


def mib(size: float | None) -> float | None:
    return None if size is None else size / 2**20


def varying(run: RunStatus) -> list[str]:
    settings = [v.settings for v in run.variants]
    return [k for k in settings[0] if len({s.get(k) for s in settings}) > 1] if len(settings) > 1 else []


def key_settings(run: RunStatus) -> list[str]:
    """The settings that tell the variants apart; every setting when there is one variant."""
    if not run.variants:
        return []
    return varying(run) or [k for k, v in run.variants[0].settings.items() if v is not None]


def variant_label(run: RunStatus, variant: VariantRecord) -> str:
    settings: dict[str, object] = dict(variant.settings)
    return " ".join(f"{k}={value}" for k in key_settings(run) if (value := settings.get(k)) is not None)


def cpu_limit_cores(variant: VariantRecord) -> float | None:
    """The CPU limit of all the variant's target pods together, where it has one."""
    limit, pods = variant.settings.get("cpu"), variant.settings.get("pods") or 1
    return None if limit is None else cpu_cores(str(limit)) * pods


def target_cpu(variant: VariantRecord, cores: float | None) -> str:
    """Peak CPU in cores, and as a share of the limit where there is one: '0.24 (97%)'."""
    limit = cpu_limit_cores(variant)
    text = number(cores, ".2f")
    return text if cores is None or limit is None else f"{text} ({cores / limit:.0%})"


def unsteady(run: RunStatus) -> bool:
    return any(s.target.unsteady() for v in run.variants for s in v.stages)


def flagged(text: str, stages: list[StageResult]) -> str:
    """The text, marked if any of these stages loaded an unsteady target, measured its injectors, or had tasks
    that raised."""
    return text + (UNSTEADY if any(s.target.unsteady() for s in stages) else "") + \
        (INJECTOR_BOUND if any(s.injector_bound for s in stages) else "") + \
        (RAISED if any(s.exceptions for s in stages) else "")


def _target_health(stage: StageResult) -> list[str]:
    return [stage.target.unsteady() or "steady"]


def _verdict(stage: StageResult) -> str:
    v = stage.verdict
    text = "-" if v is None else "pass" if v.passed else \
        "FAIL: " + "; ".join(v.violations) if v.violations else "NEAR: " + "; ".join(v.near) \
        if v.outcome == "Near" else "undecided: " + "; ".join(v.undecided)
    return text + (" (injector-bound)" if stage.injector_bound else "") + \
        (" (master behind)" if stage.master_bound else "")


def _per_stage(run: RunStatus, columns: list[str], cells: Callable[[VariantRecord, StageResult], list[str]]) -> Table:
    """One row per stage and variant, led by the variant's label when there are variants to tell apart."""
    labelled = bool(varying(run))
    rows = [[*([variant_label(run, variant)] if labelled else []), *cells(variant, s)]
            for variant in run.variants for s in variant.stages]
    return (["Variant"] if labelled else []) + columns, rows


def _ended(stage: StageResult) -> str:
    """How a stage that could end once decided ended, and when: 'Decided 12s'."""
    return f"{stage.ended_by} {stage.duration_seconds:.0f}s" if stage.ended_by in LOOKED_AT else "-"


LOOKED_AT = ("Decided", "Breached", "MaxDuration")   # the ends of a stage under stageEnd: Decided


def stage_rows(run: RunStatus) -> Table:
    has_verdicts = any(s.verdict is not None or s.injector_bound or s.master_bound
                       for v in run.variants for s in v.stages)
    health = unsteady(run)
    ends = any(s.ended_by in LOOKED_AT for v in run.variants for s in v.stages)
    arrivals = any(s.arrival_rate for v in run.variants for s in v.stages)

    def cells(variant: VariantRecord, s: StageResult) -> list[str]:
        return [flagged(str(s.injectors), [s]), count(s.users), *([_arrivals(s)] if arrivals else []),
                *percentiles(s.latency, stage_marks(run, variant, s)),
                method_cell(s.by_method, "GET", "mean"), method_cell(s.by_method, "GET", "p99"),
                method_cell(s.by_method, "POST", "mean"), method_cell(s.by_method, "POST", "p99"),
                count(s.requests), count(s.redis_peak_connections), *(_target_health(s) if health else []),
                *([_ended(s)] if ends else []), *([_verdict(s)] if has_verdicts else [])]
    columns = STAGE_COLUMNS[:2] + (["Arrivals/s (dropped)"] if arrivals else []) + STAGE_COLUMNS[2:]
    return _per_stage(run, columns + (["Target"] if health else []) + (["Ended"] if ends else [])
                      + (["Verdict"] if has_verdicts else []), cells)


def _arrivals(stage: StageResult) -> str:
    """An open model's asked rate, and how many of its arrivals found no free user: '120 (0)'."""
    if not stage.arrival_rate:
        return "-"
    return f"{stage.arrival_rate:,} ({count(stage.dropped_arrivals)})"


def resource_rows(run: RunStatus) -> Table:
    """What each stage cost the target, and what failed: the servers comparison's other columns; locally also
    the processes per pod, the largest process's RSS (the FastCGI study's RSS per worker) and the machine's CPU
    per core (the EC2 study's)."""
    health = unsteady(run)
    stages = [s for v in run.variants for s in v.stages]
    processes = any(s.target.processes is not None for s in stages)
    cores = any(s.host_cpu_per_core for s in stages)
    saturated = any(s.saturation for s in stages)
    proxied = any(s.target.proxy_peak_cpu_cores is not None or s.target.proxy_peak_memory_bytes is not None
                  for s in stages)

    def cells(variant: VariantRecord, s: StageResult) -> list[str]:
        return [flagged(str(s.injectors), [s]), count(s.users), count(s.requests), number(s.rps, ",.0f"),
                count(s.failures), number(s.error_rate, ".2%"), target_cpu(variant, s.target.peak_cpu_cores),
                number(mib(s.target.peak_memory_bytes), ",.0f"),
                *([count(s.target.processes), number(mib(s.target.peak_process_rss_bytes), ",.0f")]
                  if processes else []),
                *([number(s.target.proxy_peak_cpu_cores, ".2f"), number(mib(s.target.proxy_peak_memory_bytes), ",.0f")]
                  if proxied else []),
                *([" ".join(f"{c:.0f}" for c in s.host_cpu_per_core or ()) or "-"] if cores else []),
                count(s.redis_peak_connections), *([saturation_cell(s.saturation)] if saturated else []),
                *(_target_health(s) if health else [])]
    limited = any(cpu_limit_cores(v) is not None for v in run.variants)
    columns = [c.replace("(cores)", "(cores, % of limit)") if limited else c for c in RESOURCE_COLUMNS]
    at = columns.index("Redis peak")
    columns[at:at] = (["Processes", "RSS/process (MiB)"] if processes else []) + \
        (["Proxy CPU (cores)", "Proxy memory (MiB)"] if proxied else []) + (["CPU per core (%)"] if cores else [])
    return _per_stage(run, columns + (["Saturation"] if saturated else []) + (["Target"] if health else []), cells)


def saturation_cell(s: Saturation | None) -> str:
    """'Cpu: CPU 98% (64% throttled), 9.2 of 2 busy, queue 5 of 4, Redis CPU 12%': the first resource past its
    threshold, then each signal measured against its limit (docs/measurement.md)."""
    if s is None:
        return "-"
    said = [f"CPU {s.cpu_share:.0%}" if s.cpu_share is not None else "",
            f"({s.throttled_share:.0%} throttled)" if s.throttled_share else "",
            f"{s.in_flight:.1f} of {s.concurrency} busy" if s.in_flight is not None and s.concurrency else "",
            f"queue {s.backlog_peak} of {s.backlog_limit}" if s.backlog_peak and s.backlog_limit else "",
            f"memory {s.memory_share:.0%}" if s.memory_share is not None else "",
            f"{s.oom_kills} OOM kill(s)" if s.oom_kills else "",
            f"Redis CPU {s.redis_cpu_share:.0%}" if s.redis_cpu_share is not None else "",
            f"Redis refused {s.redis_rejected:,}" if s.redis_rejected else ""]
    signals = ", ".join(x for x in said if x).replace("%, (", "% (") or "-"
    return f"{s.crossed[0]}: {signals}" if s.crossed else signals


def headline_rows(run: RunStatus) -> Table:
    """One row per variant over all its stages: the ONS layout's first table."""
    shown = [v for v in run.variants if v.aggregate]
    rows = [[flagged(variant_label(run, variant), variant.stages), *percentiles(a.latency, marks),
             method_cell(a.by_method, "GET", "mean"),
             method_cell(a.by_method, "POST", "mean"), count(a.requests), count(a.redis_peak_connections)]
            for variant, marks in zip(shown, headline_marks(run)) if (a := variant.aggregate)]
    return ["Variant", *HEADLINE_COLUMNS], rows


def pivot_rows(run: RunStatus, users: bool = True) -> Table:
    """The p99 of every stage, one column per variant: "99th percentile timings per load stage"."""
    pivot = run.p99_by_stage
    users = users and all(r.users is not None for r in pivot)
    header = ["Injectors", *(["Users"] if users else []), *(variant_label(run, v) for v in run.variants)]
    def cells(number: int, values: tuple[float | None, ...]) -> list[str]:
        stages = [stage_of(v, number) for v in run.variants]
        return [flagged(format_ms(p), [s] if s else []) + (BEST if "p99" in marks else "")
                for p, s, marks in zip(values, stages, marks_among(run, stages))]
    return header, [[str(r.injectors), *([count(r.users)] if users else []), *cells(r.stage, r.p99_ms_by_variant)]
                    for r in pivot]


def interval_cell(intervals: Intervals | None, figure: str) -> str:
    bounds = bounds_of(intervals or {}, figure)
    if not bounds:
        return "-"
    if figure == "rps":
        return f"{bounds[0]:,.0f}–{bounds[1]:,.0f}"
    return f"{format_ms(bounds[0])}–{format_ms(bounds[1])}"


def interval_rows(run: RunStatus) -> Table:
    """Each variant's row over all its stages, as 95% intervals (results.intervals); none without them."""
    figures = ["p50", "p90", "p95", "p99", "p999", "mean", "rps"]
    rows = [[variant_label(run, v) or "-", *(interval_cell(a.intervals, f) for f in figures)]
            for v in run.variants if (a := v.aggregate) and a.intervals]
    return ["Variant", "50th", "90th", "95th", "99th", "99.9th", "mean", "req/s"], rows


REPEATS_TITLE = "Per repeat, over all its stages (the studies' trimmed mean drops the highest and lowest repeat)"


def repeat_rows(run: RunStatus) -> Table:
    """Each repeat of each variant's whole ladder, then the variant's trimmed mean; none without repeats."""
    figures = ["p50", "p90", "p95", "p99", "p999", "mean"]
    rows = []
    for variant in run.variants:
        label = variant_label(run, variant) or "-"
        for r in variant.repeats:
            if (h := r.aggregate) is not None:
                rows.append([label, str(r.repeat), count(h.requests), number(h.rps, ",.1f"),
                             *(format_ms(h.figure(f)) for f in figures)])
        if variant.aggregate and (trimmed := variant.aggregate.trimmed_mean):
            rows.append([label, "trimmed mean", "-", number(trimmed.get("rps"), ",.1f"),
                         *(format_ms(trimmed.get(f)) for f in figures)])
    return ["Variant", "Repeat", "Requests", "req/s", "50th", "90th", "95th", "99th", "99.9th", "mean"], rows


def render(header: list[str], rows: list[list[str]], left: tuple[str, ...] = ("Variant", "Verdict")) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    left_columns = {i for i, name in enumerate(header) if name in left}

    def line(cells):
        return " | ".join(c.ljust(w) if i in left_columns else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(header), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)])


def footnotes(cells: list[str]) -> list[str]:
    unmarked = [c.rstrip(BEST + UNSTEADY + INJECTOR_BOUND + RAISED) for c in cells]
    return ([FOOTNOTES[THIN_P999]] if any(c.endswith(THIN_P999) for c in unmarked) else []) + \
           ([FOOTNOTES[UNSTEADY]] if any(UNSTEADY in c for c in cells) else []) + \
           ([FOOTNOTES[BEST]] if any(c.endswith(BEST) for c in cells) else []) + \
           ([FOOTNOTES[INJECTOR_BOUND]] if any(INJECTOR_BOUND in c or "(injector-bound)" in c for c in cells)
            else []) + \
           ([FOOTNOTES[RAISED]] if any(RAISED in c for c in cells) else []) + \
           ([MASTER_BEHIND_NOTE] if any("(master behind)" in c for c in cells) else [])
