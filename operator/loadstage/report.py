"""The results table the seeds' spreadsheet had, computed right."""

from __future__ import annotations

from typing import Any

from .schema import format_duration

COLUMNS = ["Injectors", "50th", "90th", "95th", "99th", "99.9th", "GETs p99", "POSTs p99",
           "Total Requests", "Redis peak"]


def _ms(value) -> str:
    return "-" if value is None else f"{value:.0f}"


def _varying(status: dict[str, Any]) -> list[str]:
    settings = [v["settings"] for v in status["variants"]]
    return [k for k in settings[0] if len({s[k] for s in settings}) > 1] if len(settings) > 1 else []


def table_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    varying = _varying(status)
    has_verdicts = any("verdict" in s for v in status["variants"] for s in v["stages"])
    header = (["Variant"] if varying else []) + COLUMNS + (["Verdict"] if has_verdicts else [])
    rows = []
    for variant in status["variants"]:
        label = " ".join(f"{k}={variant['settings'][k]}" for k in varying)
        for s in variant["stages"]:
            lat, by = s["latencyMs"], s.get("byMethod", {})
            row = [str(s["injectors"]), *(_ms(lat[p]) for p in ("p50", "p90", "p95", "p99", "p999")),
                   _ms(by.get("GET", {}).get("latencyMs", {}).get("p99")),
                   _ms(by.get("POST", {}).get("latencyMs", {}).get("p99")),
                   f"{s['requests']:,}",
                   "-" if s.get("redisPeakConnections") is None else str(s["redisPeakConnections"])]
            if varying:
                row.insert(0, label)
            if has_verdicts:
                v = s.get("verdict")
                row.append("-" if v is None else ("pass" if v["passed"] else "FAIL: " + "; ".join(v["violations"])))
            rows.append(row)
    return header, rows


def render_table(status: dict[str, Any]) -> str:
    header, rows = table_rows(status)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    left = {i for i, name in enumerate(header) if name in ("Variant", "Verdict")}

    def line(cells):
        return " | ".join(c.ljust(w) if i in left else c.rjust(w)
                          for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    sep = "-+-".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(r) for r in rows)])


def render_capacity(status: dict[str, Any]) -> list[str]:
    lines = []
    for variant in status["variants"]:
        if "capacity" not in variant:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in variant["settings"].items())
        cap = variant["capacity"]
        if cap is None:
            lines.append(f"Capacity ({settings}): no stage met every threshold")
        else:
            lines.append(f"Capacity ({settings}): {cap['injectors']} injectors, {cap['users']} users, "
                         f"{cap['rps']:.0f} req/s (stage {cap['stage']})")
    return lines


def render_cross_check(status: dict[str, Any]) -> list[str]:
    lines = []
    for variant in status["variants"]:
        for s in variant["stages"]:
            served = s.get("target", {}).get("servedRequests")
            if served is None:
                continue
            lines.append(f"variant {variant['index'] + 1} stage {s['stage']}: Locust counted {s['requests']:,}, "
                         f"the target served {served:,}; target peak CPU {s['target']['peakCpuCores']:.2f} cores, "
                         f"peak RSS {s['target']['peakMemoryBytes'] / 2**20:.0f} MiB; "
                         f"Redis connections opened {s['redisConnectionsReceived']}")
    return lines


def progress_line(label: str, elapsed: float, duration: float, snapshot: dict[str, Any]) -> str:
    rps = snapshot.get("currentRps")
    p99 = snapshot.get("currentP99Ms")
    return (f"{label}: {format_duration(int(elapsed))}/{format_duration(duration)}"
            f"  users {snapshot.get('users', 0)}  workers {snapshot.get('workers', 0)}"
            f"  {rps if rps is not None else 0:.0f} req/s  p99 {_ms(p99)} ms")
