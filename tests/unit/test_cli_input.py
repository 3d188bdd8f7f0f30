"""`loadstage run`'s own options follow the rules of the fields they stand for, and -o and --workdir are checked
before anything starts (their missing directories are made, as by mkdir -p): each mistake exits 2 naming the
option, with no traceback and nothing left behind."""

import tempfile

import pytest
import yaml

from loadstage.cli import main
from support.documents import BASE


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

