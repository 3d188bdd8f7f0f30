"""Benchmark (i)'s scoring of a search against the truth (benchmarks/truth.py, benchmarks/search.py): a load the
truth's interval cannot tell from the objective is near, and a search whose ends it cannot refute is unrefuted,
while right() reads the truth's p99 itself."""

import sys

from support.waiting import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import search
import truth

LIMIT = 100.0
# the four-threads knee's shape: quiet below 190/s, a bistable 194/s (one 90 s repeat in three broke), past it 200/s
KNOWN = {190: {"p99Ms": 56.6, "interval": [44.9, 66.6]}, 194: {"p99Ms": 179.3, "interval": [49.5, 188.7]},
         198: {"p99Ms": 92.6, "interval": [71.0, 100.7]}, 200: {"p99Ms": 317.7, "interval": [299.3, 329.0]}}


def test_a_loads_class_is_its_truths_or_its_neighbours_where_they_agree_else_near():
    assert [truth.class_at(KNOWN, load, LIMIT) for load in (150, 190, 192, 195, 199, 200, 250)] == \
        ["meets", "meets", "near", "near", "near", "fails", "fails"]
    assert truth.class_at({190: KNOWN[190], 194: KNOWN[194]}, 250, LIMIT) == "near"


def test_a_pass_end_the_truth_cannot_tell_from_the_objective_is_unrefuted_though_its_p99_says_wrong():
    bracket = {"pass": 195, "fail": 210, "near": None}
    assert truth.p99_at(KNOWN, 195) > 1.1 * LIMIT and not search.right(bracket, KNOWN)
    assert search.unrefuted(bracket, KNOWN)
    assert not search.unrefuted({"pass": 200, "fail": 215, "near": None}, KNOWN)     # 200/s fails in the truth
    assert not search.unrefuted({"pass": 150, "fail": 190, "near": None}, KNOWN)     # 190/s meets
    assert search.unrefuted({"pass": None, "fail": None, "near": 196}, KNOWN)
    assert not search.unrefuted({"pass": None, "fail": None, "near": 150}, KNOWN)
