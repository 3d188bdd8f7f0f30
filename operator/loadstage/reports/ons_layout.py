"""The ONS layout: the tables of the ONS performance-investigation page this project grew from (a benchmark
profile, a headline row per variant, the p99 per load stage, and a breakdown per variant), as titled
sections that the Markdown and HTML reports render."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadstage.api.quantities import format_duration, format_percent
from loadstage.api.status import RunStatus, VariantAggregate, VariantRecord
from loadstage.api.types import DECIDED_NOT_BEFORE, Experiment
from loadstage.reports.tables import (
    Table,
    count,
    footnotes,
    headline_marks,
    key_settings,
    method_cell,
    number,
    percentiles,
    pivot_rows,
    resource_rows,
    stage_marks,
    variant_label,
    varying,
)

SETTING_NAMES = {"server": "server", "pods": "pods", "workers": "workers", "threads": "threads",
                 "workerClass": "worker class"}
PROFILE_SETTINGS = {"server": "Server", "interface": "Interface", "pods": "Target pods",
                    "workers": "Worker processes per pod", "threads": "Threads per worker",
                    "workerClass": "Worker class", "cpu": "CPU limit per pod", "memory": "Memory limit per pod",
                    "proxy": "Front proxy", "socket": "Proxy to server"}
PERCENTILE_COLUMNS = ["50th", "90th", "95th", "99th", "99.9th"]
INJECTORS_COLUMN = "Load injector instances"


def ons_headline_rows(run: RunStatus) -> Table:
    keys = key_settings(run)
    settings: list[tuple[dict[str, object], VariantAggregate]] = \
        [(dict(v.settings), v.aggregate) for v in run.variants if v.aggregate]
    rows = [[*(setting_cell(values.get(k)) for k in keys), *percentiles(a.latency, marks),
             count(a.requests), count(a.redis_peak_connections)]
            for (values, a), marks in zip(settings, headline_marks(run))]
    return [*(SETTING_NAMES.get(k, k) for k in keys), *PERCENTILE_COLUMNS, "total requests",
            "Redis connections (peak)"], rows


def ons_pivot_rows(run: RunStatus, users: bool = False) -> Table:
    """The ONS layout's pivot; with `users` (a ladder given in users) a Users column too."""
    header, rows = pivot_rows(run, users=users)
    return [INJECTORS_COLUMN, *header[1:]], rows


def methods(run: RunStatus) -> list[str]:
    """GET and POST first, as the ONS tables have them, then any other method a locustfile used."""
    seen = {m for v in run.variants for s in v.stages for m in s.by_method}
    return [m for m in ("GET", "POST") if m in seen] + sorted(seen - {"GET", "POST"})


def by_users(experiment: Experiment) -> bool:
    """The ladder climbs by users (stages given in users) rather than by injectors."""
    spec = experiment.spec
    return spec.search.load == "users" if spec.search else any(s.users is not None for s in spec.stages)


def breakdown_rows(run: RunStatus, variant: VariantRecord, users: bool = False) -> Table:
    """The ONS layout's table of one variant: one row per stage, its percentiles marked where they are
    significantly the best of every variant's at that stage; `users` adds the stage's users after its
    injectors."""
    shown = methods(run)
    rows = [[str(s.injectors), *([count(s.users)] if users else []),
             *percentiles(s.latency, stage_marks(run, variant, s)),
             *(method_cell(s.by_method, m, "mean") for m in shown), count(s.requests)]
            for s in variant.stages]
    return [INJECTORS_COLUMN, *(["Users"] if users else []), *PERCENTILE_COLUMNS,
            *(f"{m}s Average" for m in shown), "Total Requests"], rows


def setting_cell(value) -> str:
    return number(value, "")


def _values(run: RunStatus, key: str) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(v.settings.get(key) for v in run.variants))


def _shown(values: tuple[Any, ...]) -> str:
    return ", ".join(map(setting_cell, values)) + (" (one variant each)" if len(values) > 1 else "")


@dataclass(frozen=True)
class Option:
    """One line of the benchmark profile: its name, the value it compares by, and how it reads."""
    name: str
    value: Any
    text: str


def profile(experiment: Experiment, run: RunStatus) -> list[Option]:
    """The benchmark profile, as values (what `compare` compares) with their text (what a page shows)."""
    spec = experiment.spec
    target, injectors = spec.target, spec.injectors
    durations = (spec.search.duration,) if spec.search else tuple(dict.fromkeys(s.duration for s in spec.stages)) \
        or (spec.stage_end.max,)
    options = [Option("Target app", (target.app, target.image),
                      target.app + (f" ({target.image})" if target.image else "")),
               *(Option(name, _values(run, key), _shown(_values(run, key))) for key, name in PROFILE_SETTINGS.items()
                 if any(v.settings.get(key) is not None for v in run.variants)),
               Option("Users per injector", injectors.users_per_injector, f"{injectors.users_per_injector:,}"),
               Option("Spawn rate per injector", injectors.spawn_rate, f"{injectors.spawn_rate:g} users/s")]
    if injectors.pacing is not None:
        options.append(Option("Pacing", injectors.pacing,
                              f"one task every {format_duration(injectors.pacing)} per user (open model)"))
    else:
        wait = injectors.wait_time
        options.append(Option("Wait time", (wait.min, wait.max),
                              f"{format_duration(wait.min)} to {format_duration(wait.max)}"))
    locustfile = injectors.locustfile
    scenario = (locustfile.path or f"ConfigMap {locustfile.config_map.name if locustfile.config_map else '?'}"
                if locustfile else f"built-in {injectors.scenario or 'respondent'}")
    options += [Option("Scenario", scenario, scenario),
                Option("Stage duration", durations, ", ".join(format_duration(d or 0.0) for d in durations))]
    if by_users(experiment):
        options.append(Option("Most users per injector (stages given in users)", injectors.max_users_per_injector,
                              f"{injectors.max_users_per_injector:,}"))
    if spec.goal is not None:
        goal = spec.goal
        options.append(Option("Goal", (goal.load, goal.load and goal.amount),
                              f"the cheapest variant that meets the objective at {goal.describe()}" if goal.load
                              else f"{goal.describe()}, from each variant's capacity search"))
    if spec.search:
        search = spec.search
        searched = (search.load, search.from_, search.max, search.resolution)
        options.append(Option("Capacity search", searched, f"{search.load} from {search.from_:,} up to "
                                                           f"{search.max:,}, to {format_percent(search.resolution)}"))
    elif spec.stages:
        ladder = tuple(s.injectors for s in spec.stages)
        users = tuple(injectors.users_for(s) for s in spec.stages)
        options += [Option("Load injector ladder", ladder, ", ".join(map(str, ladder))),
                    Option("Users per stage", users, ", ".join(f"{u:,}" for u in users))]
    if spec.slo is not None:
        options.append(Option("Objective (slo)", spec.slo, spec.slo.describe()))
    end = spec.stage_end
    if end.decided:
        options.append(Option("Stage end", (end.when, end.min, end.max),
                              f"once decided, not before {format_duration(end.min or DECIDED_NOT_BEFORE)}"
                              + (f", at most {format_duration(end.max)}" if end.max else "")))
    warm = spec.warmup
    warmup = (warm.injectors, warm.arrival_rate, warm.duration) if warm else None
    rate = f"{warm.arrival_rate:,} arrivals/s on " if warm and warm.arrival_rate else ""
    warmed = f"{rate}{warm.injectors} injector(s) for {format_duration(warm.duration)}, not counted" \
        if warm else "none"
    options += [Option("Warm-up", warmup, warmed),
                Option("Redis", _redis(spec.redis), _redis(spec.redis))]
    if target.env:
        env = tuple(sorted(target.env.items()))
        options.append(Option("Target environment", env, ", ".join(f"{k}={v}" for k, v in env)))
    if spec.thresholds is not None:
        t = spec.thresholds
        limits = [f"{name} <= {format_duration(ms / 1000)}" for name, ms in t.latency_limits_ms().items()]
        if t.error_rate is not None:
            limits.append(f"error rate <= {t.error_rate:.2%}")
        options.append(Option("Thresholds", (tuple(t.latency_limits_ms().items()), t.error_rate), ", ".join(limits)))
    return options


def _redis(redis) -> str:
    return "deployed for each variant" if redis.deployed else "external" if redis.url else \
        "none (the app uses no Redis)"


def profile_rows(experiment: Experiment, run: RunStatus) -> list[list[str]]:
    """The benchmark profile: Option | Value."""
    return [[o.name, o.text] for o in profile(experiment, run)]


@dataclass(frozen=True)
class Section:
    """A titled table of the Markdown and HTML reports."""
    title: str
    header: list[str]
    rows: list[list[str]]
    text_columns: int = 0        # the leading columns that hold text, not figures
    per_variant: bool = False


def page_sections(experiment: Experiment, run: RunStatus) -> list[Section]:
    """The profile, the headline table, the p99 pivot, and one breakdown per variant."""
    sections = [Section("Benchmark profile", ["Option", "Value"], profile_rows(experiment, run), 2)]
    header, rows = ons_headline_rows(run)
    if rows:
        sections.append(Section("Results per variant", header, rows, len(key_settings(run))))
    header, rows = ons_pivot_rows(run, users=by_users(experiment))
    if len(run.variants) > 1 and rows:
        sections.append(Section("99th percentile timings per load stage", header, rows))
    header, rows = resource_rows(run)
    if rows:
        sections.append(Section("Errors and target resources per stage", header, rows, int(bool(varying(run)))))
    for variant in run.variants:
        if variant.stages:
            header, rows = breakdown_rows(run, variant, users=by_users(experiment))
            sections.append(Section(variant_label(run, variant), header, rows, per_variant=True))
    return sections


def page_footnotes(sections: list[Section]) -> list[str]:
    return footnotes([c for section in sections[1:] for row in section.rows for c in row])


def run_period(run: RunStatus) -> str:
    """The phase, and from when to when the run went."""
    when = " to ".join(t for t in (run.started_at, run.finished_at) if t)
    return f"{run.phase}{f', {when}' if when else ''}"
