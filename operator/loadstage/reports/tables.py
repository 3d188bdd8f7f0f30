"""The results tables, as rows of formatted cells: one row per stage and variant, the headline row of
every variant over all its stages, the p99 of every stage per variant, and what each stage cost the target.
The terminal, Markdown and HTML reports render these rows."""

from __future__ import annotations

from typing import Any, Callable

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


def percentiles(latency: dict[str, Any]) -> list[str]:
    return [*(format_ms(latency.get(p)) for p in ("p50", "p90", "p95", "p99")), _p999(latency)]


def method_cell(by_method: dict[str, Any], method: str, figure: str) -> str:
    return format_ms(by_method.get(method, {}).get("meanMs" if figure == "mean" else "p99Ms"))


def number(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def count(value) -> str:
    return number(value, ",")


def mib(size: int | None) -> float | None:
    return None if size is None else size / 2**20


def varying(status: dict[str, Any]) -> list[str]:
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
    labelled = bool(varying(status))
    rows = [[*([variant_label(status, variant)] if labelled else []), *cells(s)]
            for variant in status["variants"] for s in variant["stages"]]
    return (["Variant"] if labelled else []) + columns, rows


def stage_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    has_verdicts = any("verdict" in s or s.get("injectorBound") for v in status["variants"] for s in v["stages"])

    def cells(s: dict[str, Any]) -> list[str]:
        by = s.get("byMethod", {})
        return [str(s["injectors"]), count(s.get("users")), *percentiles(s["latencyMs"]),
                method_cell(by, "GET", "mean"), method_cell(by, "GET", "p99"),
                method_cell(by, "POST", "mean"), method_cell(by, "POST", "p99"),
                count(s["requests"]), count(s.get("redisPeakConnections")),
                *([_verdict(s)] if has_verdicts else [])]
    return _per_stage(status, STAGE_COLUMNS + (["Verdict"] if has_verdicts else []), cells)


RESOURCE_COLUMNS = ["Injectors", "Users", "Requests", "req/s", "Errors", "Error rate", "Target CPU (cores)",
                    "Target RSS (MiB)", "Redis peak"]


def resource_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """What each stage cost the target, and what failed: the servers comparison's other columns."""
    def cells(s: dict[str, Any]) -> list[str]:
        target = s.get("target", {})
        return [str(s["injectors"]), count(s.get("users")), count(s["requests"]), number(s.get("rps"), ",.0f"),
                count(s.get("failures")), number(s.get("errorRate"), ".2%"),
                number(target.get("peakCpuCores"), ".2f"),
                number(mib(target.get("peakMemoryBytes")), ",.0f"), count(s.get("redisPeakConnections"))]
    return _per_stage(status, RESOURCE_COLUMNS, cells)


def headline_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """One row per variant over all its stages: the ONS layout's first table."""
    rows = []
    for variant in status["variants"]:
        a = variant.get("aggregate")
        if not a:
            continue
        rows.append([variant_label(status, variant), *percentiles(a["latencyMs"]),
                     method_cell(a["byMethod"], "GET", "mean"), method_cell(a["byMethod"], "POST", "mean"),
                     count(a["requests"]), count(a.get("redisPeakConnections"))])
    return ["Variant", *HEADLINE_COLUMNS], rows


def pivot_rows(status: dict[str, Any], users: bool = True) -> tuple[list[str], list[list[str]]]:
    """The p99 of every stage, one column per variant: "99th percentile timings per load stage"."""
    pivot = status.get("p99ByStage", [])
    users = users and all(r.get("users") is not None for r in pivot)
    header = ["Injectors", *(["Users"] if users else []), *(variant_label(status, v) for v in status["variants"])]
    return header, [[str(r["injectors"]), *([count(r["users"])] if users else []),
                     *(format_ms(p) for p in r["p99MsByVariant"])] for r in pivot]


def render(header: list[str], rows: list[list[str]], left: tuple[str, ...] = ("Variant", "Verdict")) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    left_columns = {i for i, name in enumerate(header) if name in left}

    def line(cells):
        return " | ".join(c.ljust(w) if i in left_columns else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(header), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)])



def key_settings(status: dict[str, Any]) -> list[str]:
    """The settings that tell the variants apart; every setting when there is one variant."""
    if not status["variants"]:
        return []
    return varying(status) or [k for k, v in status["variants"][0]["settings"].items() if v is not None]


def footnotes(cells: list[str]) -> list[str]:
    return ([FOOTNOTES[THIN_P999]] if any(c.endswith(THIN_P999) for c in cells) else []) + \
           ([FOOTNOTES["injector-bound"]] if any("(injector-bound)" in c for c in cells) else [])

