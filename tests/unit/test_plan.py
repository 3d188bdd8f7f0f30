"""The plan a run prints before it starts, and `loadstage validate` prints: what it says is what will run."""

import copy

import yaml

from loadstage.cli import main
from support.documents import BASE


def plan_of(tmp_path, capsys, **spec):
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    doc["spec"] = {k: v for k, v in doc["spec"].items() if v is not None}
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate", str(path)]) == 0
    return capsys.readouterr().out


def test_a_search_plan_says_its_resolution_as_written(tmp_path, capsys):
    """Before, 0.5% was printed as 0%."""
    out = plan_of(tmp_path, capsys, stages=None, slo={"p99": "200ms"},
                  search={"load": "users", "from": 10, "max": 80, "resolution": "0.5%", "duration": "20s"})
    assert "users from 10 up to 80, to 0.5%, 20s a stage" in out


def test_an_arrival_rate_stage_says_its_rate_and_its_pools(tmp_path, capsys):
    """Before, its line omitted the rate, the one load it has."""
    out = plan_of(tmp_path, capsys, injectors={"maxUsersPerInjector": 40},
                  stages=[{"arrivalRate": 900, "duration": "1m"}, {"injectors": 2, "duration": "1m"}])
    assert "  stage 1: 2 injector(s), 900 arrivals a second (a pool of 40 users each), 1m\n" in out
    assert "  stage 2: 2 injector(s), 20 users, 1m\n" in out
