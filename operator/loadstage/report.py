"""The results tables the seeds' spreadsheet had, computed right: one row per stage and variant, the
headline row of every variant over all its stages, and the p99 of every stage per variant."""

from __future__ import annotations

from typing import Any

from .schema import format_duration

STAGE_COLUMNS = ["Injectors", "50th", "90th", "95th", "99th", "99.9th", "GETs avg", "GETs p99", "POSTs avg",
                 "POSTs p99", "Total Requests", "Redis peak"]
HEADLINE_COLUMNS = ["50th", "90th", "95th", "99th", "99.9th", "GETs avg", "POSTs avg", "Total Requests",
                    "Redis peak"]
THIN_P999 = "*"
FOOTNOTES = {THIN_P999: "* p99.9 of fewer than 1,000 requests: it is close to the maximum and says little.",
             "injector-bound": "injector-bound: an injector's CPU went over 90%; the stage measured the injectors, "
                               "not the target, and does not count toward capacity."}


def _ms(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _p999(latency: dict[str, Any]) -> str:
    text = _ms(latency.get("p999"))
    return text + THIN_P999 if latency.get("p999Reliable") is False else text


def _percentiles(latency: dict[str, Any]) -> list[str]:
    return [*(_ms(latency.get(p)) for p in ("p50", "p90", "p95", "p99")), _p999(latency)]


def _method(by_method: dict[str, Any], method: str, figure: str) -> str:
    return _ms(by_method.get(method, {}).get("meanMs" if figure == "mean" else "p99Ms"))


def _count(value) -> str:
    return "-" if value is None else f"{value:,}"


def _varying(status: dict[str, Any]) -> list[str]:
    settings = [v["settings"] for v in status["variants"]]
    return [k for k in settings[0] if len({s[k] for s in settings}) > 1] if len(settings) > 1 else []


def variant_label(status: dict[str, Any], variant: dict[str, Any]) -> str:
    varying = _varying(status) or list(variant["settings"])
    return " ".join(f"{k}={variant['settings'][k]}" for k in varying)


def _verdict(stage: dict[str, Any]) -> str:
    v = stage.get("verdict")
    text = "-" if v is None else ("pass" if v["passed"] else "FAIL: " + "; ".join(v["violations"]))
    return text + " (injector-bound)" if stage.get("injectorBound") else text


def stage_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    varying = _varying(status)
    has_verdicts = any("verdict" in s or s.get("injectorBound") for v in status["variants"] for s in v["stages"])
    header = (["Variant"] if varying else []) + STAGE_COLUMNS + (["Verdict"] if has_verdicts else [])
    rows = []
    for variant in status["variants"]:
        for s in variant["stages"]:
            by = s.get("byMethod", {})
            row = [str(s["injectors"]), *_percentiles(s["latencyMs"]),
                   _method(by, "GET", "mean"), _method(by, "GET", "p99"),
                   _method(by, "POST", "mean"), _method(by, "POST", "p99"),
                   _count(s["requests"]), _count(s.get("redisPeakConnections"))]
            if varying:
                row.insert(0, variant_label(status, variant))
            if has_verdicts:
                row.append(_verdict(s))
            rows.append(row)
    return header, rows


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


def pivot_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The p99 of every stage, one column per variant: "99th percentile timings per load stage"."""
    header = ["Injectors", *(variant_label(status, v) for v in status["variants"])]
    return header, [[str(r["injectors"]), *(_ms(p) for p in r["p99MsByVariant"])]
                    for r in status.get("p99ByStage", [])]


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
    cells = [c for rows in (stage_table, headline_table) for row in rows for c in row]
    notes = ([FOOTNOTES[THIN_P999]] if any(c.endswith(THIN_P999) for c in cells) else []) + \
            ([FOOTNOTES["injector-bound"]] if any("(injector-bound)" in c for c in cells) else [])
    if notes:
        parts += ["", *notes]
    return "\n".join(parts)


def render_capacity(status: dict[str, Any]) -> list[str]:
    lines = []
    for variant in status["variants"]:
        if "capacity" not in variant:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in variant["settings"].items())
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
                         f"{'-' if cpu is None else f'{cpu:.2f}'} cores, peak RSS "
                         f"{'-' if memory is None else f'{memory / 2**20:.0f}'} MiB; "
                         f"Redis connections opened {s.get('redisConnectionsReceived')}; "
                         f"injector peak CPU {_ms(s.get('injectorPeakCpuPercent'))}%")
    return lines


def progress_line(label: str, elapsed: float, duration: float, snapshot: dict[str, Any]) -> str:
    rps = snapshot.get("currentRps")
    p99 = snapshot.get("currentP99Ms")
    return (f"{label}: {format_duration(int(elapsed))}/{format_duration(duration)}"
            f"  users {snapshot.get('users', 0)}  workers {snapshot.get('workers', 0)}"
            f"  {rps if rps is not None else 0:.0f} req/s  p99 {_ms(p99)} ms")
