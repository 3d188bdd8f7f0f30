"""`loadstage report` and `compare` on damaged result files: each is read against the model and refused (exit
2) naming its first bad path; a property test changes real result files at random and asks the same."""

import contextlib
import io
import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loadstage.api.schema import ValidationError
from loadstage.cli import main
from loadstage.reports import sources
from loadstage.results import histograms
from support.documents import stored_result
from support.waiting import ROOT

STORED = {name: json.dumps(stored_result(name))
          for name in ("quickstart.yaml", "servers.json", "paced.yaml", "goal.json", "maximize.json",
                                                                 "search.json")}


def stored(name):
    """A fresh copy of a stored result (a JSON round trip: several times faster than a deep copy)."""
    return json.loads(STORED[name])


SEARCH = {"load": "users", "pass": 40, "fail": 48, "stages": 6, "loadSeconds": 120, "reason": "Found"}
CANDIDATE = {"variant": 1, "settings": {"threads": 6}, "label": "threads=6", "cost": {"cores": 2.0, "from": "limit"},
             "headroom": 0.2}
PICK = {"goal": "300 users", "reason": "Found", "sentence": "threads=6 meets it", "winner": CANDIDATE, "order": [1]}


def written(tmp_path, document, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.parametrize("change, said", [
    (lambda s: s["variants"][0]["stages"][1].pop("requests"), "status.variants[0].stages[1].requests: missing"),
    (lambda s: s["variants"][0]["stages"][0].pop("latencyMs"), "status.variants[0].stages[0].latencyMs: missing"),
    (lambda s: s["variants"][0]["stages"][0].update(rps="fast"),
     "status.variants[0].stages[0].rps: must be a number or null, got 'fast'"),
    (lambda s: s["variants"][0]["stages"][0]["latencyMs"].update(p99=[1]),
     "status.variants[0].stages[0].latencyMs.p99: must be a number or null, got [1]"),
    (lambda s: s["variants"][0].update(stages={"a": 1}), "status.variants[0].stages: must be a list, got a mapping"),
    (lambda s: s["variants"].__setitem__(0, 7), "status.variants[0]: must be a mapping, got 7"),
    # found by Hypothesis
    (lambda s: s["variants"][0]["settings"].update(server=["a"]),
     "status.variants[0].settings.server: must be a string, got ['a']"),
    (lambda s: s["variants"][0]["stages"][1]["intervals"].pop("confidence"),
     "status.variants[0].stages[1].intervals.confidence: missing"),
    (lambda s: s["variants"][0]["stages"][0]["intervals"].update(resamples=[]),
     "status.variants[0].stages[0].intervals.resamples: must be an integer, got []"),
    (lambda s: s["variants"][0]["stages"][0]["intervals"].update(p99=[1]),
     "status.variants[0].stages[0].intervals.p99: must be a list of 2 numbers or null, got [1]"),
    (lambda s: s["p99ByStage"][0].update(p99MsByVariant=[]),
     "status.p99ByStage[0].p99MsByVariant: must hold one value per variant (2), holds 0"),
    # before, read by type only: "500-100 users", a traceback on an unknown reason, a winner that is no variant
    (lambda s: s["variants"][0].update(search=dict(SEARCH, **{"pass": 500, "fail": 100})),
     "status.variants[0].search: its pass (500) must be below its fail (100)"),
    (lambda s: s["variants"][0].update(search=dict(SEARCH, reason="Bogus")),
     "status.variants[0].search.reason: must be one of Searching, Found, Near, CeilingPassed, FloorFailed, "
     "InjectorBound, Exhausted, got 'Bogus'"),
    (lambda s: s.update(recommendation=dict(PICK, winner=dict(CANDIDATE, variant=7))),
     "status.recommendation.winner.variant: must be the index of one of the status's variants (0 to 1), got 7"),
    (lambda s: s.update(recommendation=dict(PICK, order=[1, 0, 2])),
     "status.recommendation.order[2]: must be the index of one of the status's variants (0 to 1), got 2"),
    (lambda s: s["variants"][1].update(index=0),
     "status.variants[1].index: must be 1, its place in status.variants, got 0"),
    # found by Hypothesis: a traceback (a null winner is a pick's "none met it", an item of its front is not)
    (lambda s: s.update(recommendation=dict(PICK, front=[None])),
     "status.recommendation.front[0]: must be a mapping, got None"),
])
@pytest.mark.parametrize("command", [["report"], ["report", "--format", "csv"], ["compare"]])
def test_a_damaged_result_file_is_refused_naming_its_first_bad_path(tmp_path, capsys, change, said, command):
    damaged = stored("quickstart.yaml")
    change(damaged["status"])
    path = written(tmp_path, damaged)
    args = [*command, path, path] if command == ["compare"] else [*command, path]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {said}") and err.rstrip().endswith(f"(in {path})"), err


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9),
                                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=6)


def places(node, path=()):
    """Every (path) below the status, to a mapping's key or a list's item."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*path, key)
            yield from places(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield (*path, i)
            yield from places(value, (*path, i))


def changed(root, data, value, remove):
    """`root` with one place below it (drawn from `data`; the first without) removed, or set to `value`."""
    spots = list(places(root))
    where = spots[0] if data is None else data.draw(st.sampled_from(spots))
    parent = root
    for step in where[:-1]:
        parent = parent[step]
    if remove and isinstance(parent, dict):
        del parent[where[-1]]
    else:
        parent[where[-1]] = value


@given(st.sampled_from(sorted(STORED)), st.data(), json_values, st.booleans(),
       st.sampled_from(["table", "csv", "markdown"]))
@example("quickstart.yaml", None, None, True, "table")
def test_a_result_file_changed_anywhere_is_reported_or_refused_never_a_traceback(tmp_path_factory, name, data,
                                                                                  value, remove, form):
    document = stored(name)
    changed(document["status"], data, value, remove)
    path = written(tmp_path_factory.mktemp("fuzz"), document)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["report", path, "--format", form])
    said = err.getvalue().splitlines()
    assert code == 0 or (code == 2 and said and all(line.startswith("error: ") for line in said)), said


@given(st.integers(-3, 10**6), st.integers(-3, 10**6), st.none() | st.integers(-3, 10**6), st.integers(-3, 8),
       st.data())
def test_a_search_bracket_or_a_picks_variant_that_cannot_be_is_refused_and_any_other_is_reported(
        tmp_path_factory, passed, failed, near, winner, data):
    """The rules a type cannot say: a bracket's pass below its fail (a load at the objective between them), a
    pick's variant among the status's."""
    document = stored("goal.json")
    status = document["status"]
    variant = data.draw(st.integers(0, len(status["variants"]) - 1))
    status["variants"][variant]["search"] = dict(SEARCH, **{"pass": passed, "fail": failed},
                                                 **({} if near is None else {"near": near, "reason": "Near"}))
    status["recommendation"]["winner"]["variant"] = winner
    path = written(tmp_path_factory.mktemp("rules"), document)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        code = main(["report", path])
    bracket = passed < failed
    inside = near is None or passed < near < failed
    possible = bracket and inside and 0 <= winner < len(status["variants"])
    assert code == (0 if possible else 2), err.getvalue()
    if not possible:
        assert err.getvalue().startswith(
            f"error: status.variants[{variant}].search: its pass" if not bracket else
            f"error: status.variants[{variant}].search: its load at the objective" if not inside else
            "error: status.recommendation.winner.variant: must be the index"), err.getvalue()


def test_a_yaml_result_file_cut_at_a_line_break_is_refused_never_shown_in_part(tmp_path, capsys):
    """Cut at a line break, YAML still parses, as a shorter run: every cut before the artifacts is refused."""
    lines = (ROOT / "tests" / "data" / "results" / "quickstart.yaml").read_text().splitlines(keepends=True)
    end_of_status = lines.index("artifacts:\n")
    for cut in range(1, end_of_status, max(1, end_of_status // 40)):
        path = tmp_path / f"cut-{cut}.yaml"
        path.write_text("".join(lines[:cut]))
        assert main(["report", str(path)]) == 2, cut
        assert capsys.readouterr().err.startswith("error: "), cut


@settings(max_examples=settings().max_examples // 3)   # each example reads every stage of a run
@given(st.sampled_from(["quickstart.yaml", "paced.yaml"]), st.data(), json_values, st.booleans())
def test_an_artifact_changed_anywhere_is_read_or_refused_never_a_traceback(tmp_path_factory, name, data, value,
                                                                         remove):
    """What `loadstage artifacts` and the HTML report read; test_a_damaged_artifact_… below runs them whole."""
    document = stored(name)
    changed(document["artifacts"], data, value, remove)
    path = written(tmp_path_factory.mktemp("fuzz"), document)
    try:
        for v, r, n, raw in sources.load_artifacts(path, document=document):
            artifact = sources.artifact_of(path, raw, v, r, n)
            if artifact.histogram is not None:
                histograms.latency_ms(histograms.decode(artifact.histogram))
    except ValidationError as e:
        assert all(where and message for where, message in e.problems)


def test_a_damaged_artifact_is_refused_by_the_html_report_naming_it(tmp_path, capsys):
    damaged = stored("quickstart.yaml")
    damaged["artifacts"][0]["stages"][1]["histogram"] = "not a histogram"
    damaged["artifacts"][0]["stages"][0]["series"][3]["rps"] = "fast"
    path = written(tmp_path, damaged)
    assert main(["report", path, "--format", "html", "-o", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err == (f"error: artifacts (variant 1, stage 1).series[3].rps: must be a number, got "
                                       f"'fast' (in {path})\n")
    damaged["artifacts"][0]["stages"][0]["series"][3]["rps"] = 1.5
    path = written(tmp_path, damaged)
    assert main(["artifacts", path, "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"error: artifacts (variant 1, stage 2).histogram: is not an encoded HDR "
                                       f"histogram (in {path})\n")
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "out").exists()


def test_what_hypothesis_found_is_refused_or_read_without_a_traceback():
    """Three damaged stored runs it drew: a list that is null, a confidence of 1.5, an interval of 600 orders of
    magnitude."""
    from loadstage.api.schema import ShapeError
    from loadstage.api.status.figures import INTERVALS
    from loadstage.reports.sources import ARTIFACT_ENTRIES
    from loadstage.results.differences import difference
    with pytest.raises(ShapeError, match="must be a list, got None"):
        ARTIFACT_ENTRIES.read([{"variant": 1, "stages": None}], "artifacts")
    with pytest.raises(ShapeError, match=r"must be above 0 and below 1, got 1\.5"):
        INTERVALS.read({"confidence": 1.5, "method": "bootstrap"}, "intervals")
    wide = {"p99": [1e-300, 1e300], "confidence": 0.95}
    found = difference("p99", 10.0, wide, 10.0, wide)
    assert found.low == -1.0 and math.isfinite(found.high) and found.relative == 0.0
