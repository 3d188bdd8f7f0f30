"""The ONS layout: the tables of the ONS performance-investigation page this project grew from (a benchmark
profile, a headline row per variant, the p99 per load stage, and a breakdown per variant), as titled
sections that the Markdown and HTML reports render."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadstage.api.quantities import format_duration
from loadstage.api.types import Experiment
from loadstage.reports.tables import (
    count,
    footnotes,
    key_settings,
    method_cell,
    number,
    percentiles,
    pivot_rows,
    resource_rows,
    variant_label,
    varying,
)

SETTING_NAMES = {"server": "server", "pods": "pods", "workers": "workers", "threads": "threads",
                 "workerClass": "worker class"}
PROFILE_SETTINGS = {"server": "Server", "pods": "Target pods", "workers": "Worker processes per pod",
                    "threads": "Threads per worker", "workerClass": "Gunicorn worker class"}
PERCENTILE_COLUMNS = ["50th", "90th", "95th", "99th", "99.9th"]
INJECTORS_COLUMN = "Load injector instances"


def ons_headline_rows(status: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    keys = key_settings(status)
    rows = [[*(setting_cell(v["settings"].get(k)) for k in keys), *percentiles(v["aggregate"]["latencyMs"]),
             count(v["aggregate"]["requests"]), count(v["aggregate"].get("redisPeakConnections"))]
            for v in status["variants"] if v.get("aggregate")]
    return [*(SETTING_NAMES.get(k, k) for k in keys), *PERCENTILE_COLUMNS, "total requests",
            "Redis connections (peak)"], rows


def ons_pivot_rows(status: dict[str, Any], users: bool = False) -> tuple[list[str], list[list[str]]]:
    """The ONS layout's pivot; with `users` (a ladder given in users) a Users column too."""
    header, rows = pivot_rows(status, users=users)
    return [INJECTORS_COLUMN, *header[1:]], rows


def methods(status: dict[str, Any]) -> list[str]:
    """GET and POST first, as the ONS tables have them, then any other method a locustfile used."""
    seen = {m for v in status["variants"] for s in v["stages"] for m in s.get("byMethod", {})}
    return [m for m in ("GET", "POST") if m in seen] + sorted(seen - {"GET", "POST"})


def by_users(experiment: Experiment) -> bool:
    """The ladder climbs by users (stages given in users) rather than by injectors."""
    return any(s.users is not None for s in experiment.spec.stages)


def breakdown_rows(status: dict[str, Any], variant: dict[str, Any],
                   users: bool = False) -> tuple[list[str], list[list[str]]]:
    """The ONS layout's table of one variant: one row per stage; `users` adds the stage's users after its injectors."""
    shown = methods(status)
    rows = [[str(s["injectors"]), *([count(s.get("users"))] if users else []), *percentiles(s["latencyMs"]),
             *(method_cell(s.get("byMethod", {}), m, "mean") for m in shown), count(s["requests"])]
            for s in variant["stages"]]
    return [INJECTORS_COLUMN, *(["Users"] if users else []), *PERCENTILE_COLUMNS,
            *(f"{m}s Average" for m in shown), "Total Requests"], rows


def setting_cell(value) -> str:
    return number(value, "")


def _values(status: dict[str, Any], key: str) -> str:
    values = list(dict.fromkeys(v["settings"].get(key) for v in status["variants"]))
    return ", ".join(map(setting_cell, values)) + (" (one variant each)" if len(values) > 1 else "")


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
    header, rows = ons_headline_rows(status)
    if rows:
        sections.append(Section("Results per variant", header, rows, len(key_settings(status))))
    header, rows = ons_pivot_rows(status, users=by_users(experiment))
    if len(status["variants"]) > 1 and rows:
        sections.append(Section("99th percentile timings per load stage", header, rows))
    header, rows = resource_rows(status)
    if rows:
        sections.append(Section("Errors and target resources per stage", header, rows, int(bool(varying(status)))))
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
