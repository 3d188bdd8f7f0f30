"""The results tables the seeds' spreadsheet had, computed right: one row per stage and variant, the
headline row of every variant over all its stages, and the p99 of every stage per variant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .model import Experiment
from .schema import format_duration

STAGE_COLUMNS = ["Injectors", "Users", "50th", "90th", "95th", "99th", "99.9th", "GETs avg", "GETs p99", "POSTs avg",
                 "POSTs p99", "Total Requests", "Redis peak"]
HEADLINE_COLUMNS = ["50th", "90th", "95th", "99th", "99.9th", "GETs avg", "POSTs avg", "Total Requests",
                    "Redis peak"]
THIN_P999 = "*"
FOOTNOTES = {THIN_P999: "* p99.9 of fewer than 1,000 requests: it is close to the maximum and says little.",
             "injector-bound": "injector-bound: an injector's CPU went over 90%; the stage measured the injectors, "
                               "not the target, and does not count toward capacity."}


def format_ms(value) -> str:
    """Milliseconds to 3 significant digits (the histograms' resolution), whole above 100."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _p999(latency: dict[str, Any]) -> str:
    text = format_ms(latency.get("p999"))
    return text + THIN_P999 if latency.get("p999Reliable") is False else text


def _percentiles(latency: dict[str, Any]) -> list[str]:
    return [*(format_ms(latency.get(p)) for p in ("p50", "p90", "p95", "p99")), _p999(latency)]


def _method(by_method: dict[str, Any], method: str, figure: str) -> str:
    return format_ms(by_method.get(method, {}).get("meanMs" if figure == "mean" else "p99Ms"))


def _number(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def _count(value) -> str:
    return _number(value, ",")


def _mib(size: int | None) -> float | None:
    return None if size is None else size / 2**20


def _varying(status: dict[str, Any]) -> list[str]:
    settings = [v["settings"] for v in status["variants"]]
    return [k for k in settings[0] if len({s.get(k) for s in settings}) > 1] if len(settings) > 1 else []


def variant_label(status: dict[str, Any], variant: dict[str, Any]) -> str:
    settings = variant["settings"]
    return " ".join(f"{k}={settings[k]}" for k in key_settings(status) if settings.get(k) is not None)


def _verdict(stage: dict[str, Any]) -> str:
    v = stage.get("verdict")
    text = "-" if v is None else ("pass" if v["passed"] else "FAIL: " + "; ".join(v["violations"]))
    return text + " (injector-bound)" if stage.get("injectorBound") else text


def _per_stage(status: dict[str, Any], columns: list[str],
               cells: Callable[[dict[str, Any]], list[str]]) -> tuple[list[str], list[list[str]]]:
    """One row per stage and variant, led by the variant's label when there are variants to tell apart."""
    varying = _varying(status)
    rows = [[*([variant_label(status, variant)] if varying else []), *cells(s)]
            for variant in status["variants"] for s in variant["stages"]]
    return (["Variant"] if varying else []) + columns, rows


def stage_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    has_verdicts = any("verdict" in s or s.get("injectorBound") for v in status["variants"] for s in v["stages"])

    def cells(s: dict[str, Any]) -> list[str]:
        by = s.get("byMethod", {})
        return [str(s["injectors"]), _count(s.get("users")), *_percentiles(s["latencyMs"]),
                _method(by, "GET", "mean"), _method(by, "GET", "p99"),
                _method(by, "POST", "mean"), _method(by, "POST", "p99"),
                _count(s["requests"]), _count(s.get("redisPeakConnections")),
                *([_verdict(s)] if has_verdicts else [])]
    return _per_stage(status, STAGE_COLUMNS + (["Verdict"] if has_verdicts else []), cells)


RESOURCE_COLUMNS = ["Injectors", "Users", "Requests", "req/s", "Errors", "Error rate", "Target CPU (cores)",
                    "Target RSS (MiB)", "Redis peak"]


def resource_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """What each stage cost the target, and what failed: the servers comparison's other columns."""
    def cells(s: dict[str, Any]) -> list[str]:
        target = s.get("target", {})
        return [str(s["injectors"]), _count(s.get("users")), _count(s["requests"]), _number(s.get("rps"), ",.0f"),
                _count(s.get("failures")), _number(s.get("errorRate"), ".2%"),
                _number(target.get("peakCpuCores"), ".2f"),
                _number(_mib(target.get("peakMemoryBytes")), ",.0f"), _count(s.get("redisPeakConnections"))]
    return _per_stage(status, RESOURCE_COLUMNS, cells)


def headline_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """One row per variant over all its stages: the seeds' first table."""
    rows = []
    for variant in status["variants"]:
        a = variant.get("aggregate")
        if not a:
            continue
        rows.append([variant_label(status, variant), *_percentiles(a["latencyMs"]),
                     _method(a["byMethod"], "GET", "mean"), _method(a["byMethod"], "POST", "mean"),
                     _count(a["requests"]), _count(a.get("redisPeakConnections"))])
    return ["Variant", *HEADLINE_COLUMNS], rows


def pivot_rows(status: dict[str, Any], users: bool = True) -> tuple[list[str], list[list[str]]]:
    """The p99 of every stage, one column per variant: "99th percentile timings per load stage"."""
    pivot = status.get("p99ByStage", [])
    users = users and all(r.get("users") is not None for r in pivot)
    header = ["Injectors", *(["Users"] if users else []), *(variant_label(status, v) for v in status["variants"])]
    return header, [[str(r["injectors"]), *([_count(r["users"])] if users else []),
                     *(format_ms(p) for p in r["p99MsByVariant"])] for r in pivot]


def render(header: list[str], rows: list[list[str]], left: tuple[str, ...] = ("Variant", "Verdict")) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    left_columns = {i for i, name in enumerate(header) if name in left}

    def line(cells):
        return " | ".join(c.ljust(w) if i in left_columns else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(header), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)])


def render_table(status: dict[str, Any]) -> str:
    return render(*stage_rows(status))


def render_report(status: dict[str, Any]) -> str:
    """Every table, with the footnotes of the flags that appear."""
    stages_header, stage_table = stage_rows(status)
    parts = [render(stages_header, stage_table)]
    headline_header, headline_table = headline_rows(status)
    if headline_table:
        parts += ["", "Per variant, over all its stages:", render(headline_header, headline_table)]
    pivot_header, pivot_table = pivot_rows(status)
    if len(status["variants"]) > 1 and pivot_table:
        parts += ["", "99th percentile per stage (ms):", render(pivot_header, pivot_table, left=())]
    resources_header, resources_table = resource_rows(status)
    if resources_table:
        parts += ["", "Errors and target resources per stage (peaks while the stage ran):",
                  render(resources_header, resources_table)]
    notes = footnotes([c for rows in (stage_table, headline_table) for row in rows for c in row])
    if notes:
        parts += ["", *notes]
    return "\n".join(parts)


def render_capacity(status: dict[str, Any]) -> list[str]:
    lines = []
    for variant in status["variants"]:
        if "capacity" not in variant:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in variant["settings"].items() if v is not None)
        cap = variant["capacity"]
        if cap is None:
            bound = [str(s["stage"]) for s in variant["stages"]
                     if s.get("injectorBound") and s.get("verdict", {}).get("passed")]
            why = (f"stage {', '.join(bound)} passed, but its injectors were CPU-bound" if bound
                   else "no stage met every threshold")
            lines.append(f"Capacity ({settings}): none; {why}")
            continue
        knee = (f"; stage {cap['firstFailedStage']} was the first to fail" if cap.get("firstFailedStage")
                else "")
        lines.append(f"Capacity ({settings}): {cap['injectors']} injectors, {cap['users']} users, "
                     f"{cap['rps']:.0f} req/s (stage {cap['stage']}{knee})")
    return lines


def render_cross_check(status: dict[str, Any]) -> list[str]:
    lines = []
    for variant in status["variants"]:
        for s in variant["stages"]:
            served = s.get("target", {}).get("servedRequests")
            if served is None:
                continue
            cpu, memory = s["target"].get("peakCpuCores"), s["target"].get("peakMemoryBytes")
            lines.append(f"variant {variant['index'] + 1} stage {s['stage']}: Locust counted {s['requests']:,}, "
                         f"the target served {served:,}; target peak CPU "
                         f"{_number(cpu, '.2f')} cores, peak RSS {_number(_mib(memory), '.0f')} MiB; "
                         f"Redis connections opened {s.get('redisConnectionsReceived')}; "
                         f"injector peak CPU {format_ms(s.get('injectorPeakCpuPercent'))}%")
    return lines


def progress_line(label: str, elapsed: float, duration: float, snapshot: dict[str, Any]) -> str:
    rps = snapshot.get("currentRps")
    p99 = snapshot.get("currentP99Ms")
    return (f"{label}: {format_duration(int(elapsed))}/{format_duration(duration)}"
            f"  users {snapshot.get('users', 0)}  workers {snapshot.get('workers', 0)}"
            f"  {rps if rps is not None else 0:.0f} req/s  p99 {format_ms(p99)} ms")


# -- the seeds' tables: what a performance-investigation page shows ---------------------------------

SETTING_NAMES = {"server": "server", "pods": "pods", "workers": "workers", "threads": "threads",
                 "workerClass": "worker class"}
PROFILE_SETTINGS = {"server": "Server", "pods": "Target pods", "workers": "Worker processes per pod",
                    "threads": "Threads per worker", "workerClass": "Gunicorn worker class"}
PERCENTILE_COLUMNS = ["50th", "90th", "95th", "99th", "99.9th"]
INJECTORS_COLUMN = "Load injector instances"


def key_settings(status: dict[str, Any]) -> list[str]:
    """The settings that tell the variants apart; every setting when there is one variant."""
    if not status["variants"]:
        return []
    return _varying(status) or [k for k, v in status["variants"][0]["settings"].items() if v is not None]


def seeds_headline_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    keys = key_settings(status)
    rows = [[*(_setting(v["settings"].get(k)) for k in keys), *_percentiles(v["aggregate"]["latencyMs"]),
             _count(v["aggregate"]["requests"]), _count(v["aggregate"].get("redisPeakConnections"))]
            for v in status["variants"] if v.get("aggregate")]
    return [*(SETTING_NAMES.get(k, k) for k in keys), *PERCENTILE_COLUMNS, "total requests",
            "Redis connections (peak)"], rows


def seeds_pivot_rows(status: dict[str, Any], users: bool = False) -> tuple[list[str], list[list[str]]]:
    """The seeds' pivot; with `users` (a ladder given in users) a Users column too."""
    header, rows = pivot_rows(status, users=users)
    return [INJECTORS_COLUMN, *header[1:]], rows


def methods(status: dict[str, Any]) -> list[str]:
    """GET and POST first, as the seeds have them, then any other method a locustfile used."""
    seen = {m for v in status["variants"] for s in v["stages"] for m in s.get("byMethod", {})}
    return [m for m in ("GET", "POST") if m in seen] + sorted(seen - {"GET", "POST"})


def by_users(experiment: Experiment) -> bool:
    """The ladder climbs by users (stages given in users) rather than by injectors."""
    return any(s.users is not None for s in experiment.spec.stages)


def breakdown_rows(status: dict[str, Any], variant: dict[str, Any],
                   users: bool = False) -> tuple[list[str], list[list[str]]]:
    """The seeds' table of one variant: one row per stage; `users` adds the stage's users after its injectors."""
    shown = methods(status)
    rows = [[str(s["injectors"]), *([_count(s.get("users"))] if users else []), *_percentiles(s["latencyMs"]),
             *(_method(s.get("byMethod", {}), m, "mean") for m in shown), _count(s["requests"])]
            for s in variant["stages"]]
    return [INJECTORS_COLUMN, *(["Users"] if users else []), *PERCENTILE_COLUMNS,
            *(f"{m}s Average" for m in shown), "Total Requests"], rows


def _setting(value) -> str:
    return _number(value, "")


def _values(status: dict[str, Any], key: str) -> str:
    values = list(dict.fromkeys(v["settings"].get(key) for v in status["variants"]))
    return ", ".join(map(_setting, values)) + (" (one variant each)" if len(values) > 1 else "")


def profile_rows(experiment: Experiment, status: dict[str, Any]) -> list[list[str]]:
    """The benchmark profile: Option | Value."""
    spec = experiment.spec
    target, injectors = spec.target, spec.injectors
    durations = list(dict.fromkeys(format_duration(s.duration) for s in spec.stages))
    rows = [["Target app", target.app + (f" ({target.image})" if target.image else "")],
            *([name, _values(status, key)] for key, name in PROFILE_SETTINGS.items()
              if any(v["settings"].get(key) is not None for v in status["variants"])),
            ["Users per injector", f"{injectors.users_per_injector:,}"],
            ["Spawn rate per injector", f"{injectors.spawn_rate:g} users/s"]]
    if injectors.pacing is not None:
        rows.append(["Pacing", f"one task every {format_duration(injectors.pacing)} per user (open model)"])
    else:
        rows.append(["Wait time", f"{format_duration(injectors.wait_time.min)} to "
                                  f"{format_duration(injectors.wait_time.max)}"])
    scenario = (injectors.locustfile.path or f"ConfigMap {injectors.locustfile.config_map.name}"
                if injectors.locustfile else f"built-in {injectors.scenario or 'respondent'}")
    rows += [["Scenario", scenario],
             ["Stage duration", ", ".join(durations)],
             ["Most users per injector (stages given in users)" if by_users(experiment) else "", f"{injectors.max_users_per_injector:,}"],
             ["Load injector ladder", ", ".join(str(s.injectors) for s in spec.stages)],
             ["Users per stage", ", ".join(f"{injectors.users_for(s):,}" for s in spec.stages)],
             ["Warm-up", f"{spec.warmup.injectors} injector(s) for {format_duration(spec.warmup.duration)}, "
                         f"not counted" if spec.warmup else "none"],
             ["Redis", "deployed for each variant" if spec.redis.deployed else "external"]]
    rows = [row for row in rows if row[0]]
    if target.env:
        rows.append(["Target environment", ", ".join(f"{k}={v}" for k, v in sorted(target.env.items()))])
    if spec.thresholds is not None:
        limits = [f"{name} <= {format_duration(ms / 1000)}" for name, ms in spec.thresholds.latency_limits_ms().items()]
        if spec.thresholds.error_rate is not None:
            limits.append(f"error rate <= {spec.thresholds.error_rate:.2%}")
        rows.append(["Thresholds", ", ".join(limits)])
    return rows


def footnotes(cells: list[str]) -> list[str]:
    return ([FOOTNOTES[THIN_P999]] if any(c.endswith(THIN_P999) for c in cells) else []) + \
           ([FOOTNOTES["injector-bound"]] if any("(injector-bound)" in c for c in cells) else [])


@dataclass(frozen=True)
class Section:
    """A titled table of the Markdown and HTML reports."""
    title: str
    header: list[str]
    rows: list[list[str]]
    text_columns: int = 0        # the leading columns that hold text, not figures
    per_variant: bool = False


def page_sections(experiment: Experiment, status: dict[str, Any]) -> list[Section]:
    """The profile, the headline table, the p99 pivot, and one breakdown per variant."""
    sections = [Section("Benchmark profile", ["Option", "Value"], profile_rows(experiment, status), 2)]
    header, rows = seeds_headline_rows(status)
    if rows:
        sections.append(Section("Results per variant", header, rows, len(key_settings(status))))
    header, rows = seeds_pivot_rows(status, users=by_users(experiment))
    if len(status["variants"]) > 1 and rows:
        sections.append(Section("99th percentile timings per load stage", header, rows))
    header, rows = resource_rows(status)
    if rows:
        sections.append(Section("Errors and target resources per stage", header, rows, int(bool(_varying(status)))))
    for variant in status["variants"]:
        if variant["stages"]:
            header, rows = breakdown_rows(status, variant, users=by_users(experiment))
            sections.append(Section(variant_label(status, variant), header, rows, per_variant=True))
    return sections


def page_footnotes(sections: list[Section]) -> list[str]:
    return footnotes([c for section in sections[1:] for row in section.rows for c in row])


def run_period(status: dict[str, Any]) -> str:
    """The phase, and from when to when the run went."""
    when = " to ".join(t for t in (status.get("startedAt"), status.get("finishedAt")) if t)
    return f"{status.get('phase', 'Pending')}{f', {when}' if when else ''}"
