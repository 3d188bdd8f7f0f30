"""`loadstage run`'s own options follow the rules of the fields they stand for, and -o and --workdir are checked
before anything starts (their missing directories are made, as by mkdir -p): each mistake exits 2 naming the
option, with no traceback and nothing left behind."""

import tempfile

import pytest
import yaml

from loadstage.cli import main
from support.documents import BASE
from support.waiting import ROOT


@pytest.fixture
def experiment(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))     # where a work directory would go
    (tmp_path / "tmp").mkdir()
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(BASE))
    return path


@pytest.mark.parametrize("option, value, said", [
    ("--stage-duration", "0s", "argument --stage-duration: must be at least 1s, got 0s"),
    ("--stage-duration", "-5s", "argument --stage-duration: must be a duration such as 90s, 20m or 1h30m, got '-5s'"),
    ("--stage-duration", "25h", "argument --stage-duration: must be at most 24h, got 25h"),
    ("--warmup-duration", "500ms", "argument --warmup-duration: must be at least 1s, got 500ms"),
    ("--metrics-hold", "2h", "argument --metrics-hold: must be at most 1h, got 2h"),
])
def test_a_duration_option_follows_its_fields_rule(experiment, capsys, option, value, said):
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(experiment), option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith(f"loadstage run: error: {said}\n") and "Traceback" not in err


@pytest.mark.parametrize("args, said", [
    (["-o", "{tmp}/a-file/r.json"], "-o: {tmp}/a-file is a file, not a directory"),
    (["-o", "{tmp}/a-file/below/r.json"], "-o: {tmp}/a-file is a file, not a directory"),
    (["-o", "{tmp}"], "-o: {tmp} is a directory; name a .json or .yaml file"),
    (["--workdir", "{tmp}/a-file"], "--workdir: {tmp}/a-file is a file, not a directory"),
    (["--workdir", "{tmp}/a-file/below"], "--workdir: {tmp}/a-file is a file, not a directory"),
])
def test_an_output_that_cannot_be_written_is_refused_before_anything_starts(experiment, capsys, args, said):
    tmp = experiment.parent
    assert main(["run", str(experiment), "-q", *(a.format(tmp=tmp) for a in args)]) == 2
    assert capsys.readouterr().err == f"error: {said.format(tmp=tmp)}\n"
    assert list((tmp / "tmp").iterdir()) == []          # no work directory made
    assert sorted(p.name for p in tmp.iterdir()) == ["a-file", "experiment.yaml", "tmp"]


DECIDED = {"slo": {"p99": "200ms"}, "stageEnd": {"when": "Decided", "min": "10s", "max": "1m"}}


@pytest.mark.parametrize("spec, args, said", [
    (DECIDED, ["--stage-duration", "5s"],
     "--stage-duration: the experiment it makes is refused: spec.stageEnd.max: must be at least 8s, got 5s"),
])
def test_an_option_that_makes_a_spec_its_own_rules_refuse_is_refused_before_anything_starts(experiment, capsys,
                                                                                             spec, args, said):
    """Before, --stage-duration 5s with stageEnd Decided ran, and the result file's spec (stageEnd.max 5s) was
    then refused by report and compare."""
    doc = yaml.safe_load(experiment.read_text())
    doc["spec"].update(spec)
    experiment.write_text(yaml.safe_dump(doc))
    assert main(["run", str(experiment), "-q", *args]) == 2
    err = capsys.readouterr().err
    assert f"error: {said}\n" in err and err.count("error: ") == err.count(f"error: {args[0]}: ")
    assert list((experiment.parent / "tmp").iterdir()) == []          # no work directory made



@pytest.mark.parametrize("app, server, said", [
    ("interfaces:wsgi_app", "uvicorn", "interfaces:wsgi_app is a WSGI app (its call takes environ, start_response), "
                                       "but uvicorn pods=1 workers=2 threads=2 speaks ASGI"),
    ("interfaces:asgi_app", "gunicorn", "interfaces:asgi_app is an ASGI app (its call is a coroutine of scope, "
                                        "receive, send), but gunicorn pods=1 workers=2 threads=2 gthread speaks WSGI"),
])
def test_an_app_of_ones_own_under_a_server_of_the_other_interface_is_refused_before_the_run(experiment, capsys, app,
                                                                                            server, said):
    """Before, it ran, every request failed (exit 5), and the cause was only in the target's log."""
    doc = yaml.safe_load(experiment.read_text())
    doc["spec"]["target"] = {"app": app, "server": server, "env": {"PYTHONPATH": str(ROOT / "tests" / "apps")}}
    doc["spec"]["redis"] = {"deploy": False}
    experiment.write_text(yaml.safe_dump(doc))
    assert main(["run", str(experiment), "-q"]) == 2
    assert capsys.readouterr().err == f"error: spec.target.app: {said}: it would fail every request\n"
    assert list((experiment.parent / "tmp").iterdir()) == []


def test_an_app_of_ones_own_under_a_server_of_its_interface_passes_and_one_that_cannot_be_imported_is_left_to_the_run():
    from loadstage.api.load import parse_experiment
    from loadstage.local.app_interface import interface_problems

    def problems(app, servers):
        doc = {**BASE, "spec": {**BASE["spec"], "redis": {"deploy": False}, "matrix": {"server": servers},
                                "target": {"app": app, "env": {"PYTHONPATH": str(ROOT / "tests" / "apps")}}}}
        return interface_problems(parse_experiment(doc), ROOT)
    assert problems("interfaces:asgi_app", ["uvicorn", "hypercorn"]) == []
    assert problems("interfaces:wsgi_app", ["gunicorn", "waitress", "hypercorn"]) == []   # hypercorn serves either
    assert problems("no_such_module:app", ["uvicorn"]) == []
    assert [p for _, p in problems("interfaces:wsgi_app", ["gunicorn", "uvicorn"])] == [
        "interfaces:wsgi_app is a WSGI app (its call takes environ, start_response), but uvicorn pods=1 workers=2 "
        "threads=2 speaks ASGI: it would fail every request"]
