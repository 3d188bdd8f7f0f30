"""What crosses a process boundary (api.wire) is declared once: the master writes its headline and the engine
reads it from the same declaration, as the command line's builder writes --slo and the extension reads it."""

import ast
import dataclasses
import json

import pytest
from locust.stats import RequestStats

from loadstage.api.schema import ShapeError
from loadstage.api.types import Slo
from loadstage.api.wire import SLO_ARGUMENT, headline_json, read_headline, read_slo_argument, slo_argument
from loadstage.locust.recorder import StageRecorder
from loadstage.locust.summary import build, figures
from support.waiting import ROOT


def test_every_objective_of_the_slo_crosses_to_the_master_in_its_unit():
    declared = {SLO_ARGUMENT.attr(key) for key in SLO_ARGUMENT.fields}
    assert declared == {f.name for f in dataclasses.fields(Slo)}
    slo = Slo(None, None, None, 0.25, None, 0.01, min_rps=40.0)
    assert slo_argument(slo) == '{"p99":0.25,"errorRate":0.01,"minRps":40.0,"tolerance":0.1}'
    assert read_slo_argument(slo_argument(slo)) == slo
    with pytest.raises(ShapeError, match=r"--slo.p99: must be a number or null, got '250ms'"):
        read_slo_argument('{"p99": "250ms"}')


def test_the_master_writes_only_what_the_headline_declares_and_the_engine_reads_it_back():
    headline = figures(*_stats(), injectors=2)[0]
    assert read_headline(json.loads(headline_json(headline))) == headline
    assert read_headline(build(*_stats())[0])["latencyMs"].p99 == 198.05   # HDR: 3 significant digits
    with pytest.raises(ShapeError, match=r"headline.endedAt: is not declared"):
        headline_json({**headline, "endedAt": 12.0})
    with pytest.raises(ShapeError, match=r"headline.byMethod.GET.latencyMs: must be a Latency, got \{"):
        headline_json({**headline, "byMethod": {"GET": {**headline["byMethod"]["GET"], "latencyMs": {"p99": 1}}}})


def _stats():
    stats, recorder = RequestStats(), StageRecorder()
    for ms in range(1, 201):
        stats.log_request("GET", "/", ms, 10)
        recorder.record("GET", "/", ms)
    recorder.keep_unsent()
    return stats, recorder


def test_a_headline_without_a_figure_the_engine_needs_is_refused_naming_it():
    written = build(*_stats())[0]
    del written["rps"]
    with pytest.raises(ShapeError, match=r"^headline.rps: missing$"):
        read_headline(written)


def test_the_extension_file_locust_loads_only_imports_the_extension_inside_the_package():
    tree = ast.parse((ROOT / "injectors" / "loadstage_results.py").read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert [(node.module, [a.name for a in node.names]) for node in imports] == [("loadstage.locust.extension", ["*"])]
    assert len([n for n in tree.body if not isinstance(n, ast.Expr)]) == 1
