"""Every command that reads an experiment file, over every bad document of tests/data/invalid: exit 2, each line
an error naming a path, never a traceback, nothing started."""

import contextlib
import io

import pytest
import yaml

from loadstage.cli import main
from support.invalid_documents import CASES, case_document


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad")
    paths = {}
    for case in CASES:
        paths[case["name"]] = folder / f"{case['name']}.yaml"
        paths[case["name"]].write_text(yaml.safe_dump(case_document(case)))
    return paths


@pytest.mark.parametrize("command", [["validate"], ["run", "-q"], ["report"]])
def test_every_command_refuses_every_bad_document_naming_its_field(written, command, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))       # where a run's work directory would go
    wrong = []
    for case in CASES:
        path = str(written[case["name"]])
        args = [command[0], path, *command[1:]]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            try:
                code = main(args)
            except SystemExit as e:
                code = e.code
        said = err.getvalue().splitlines()
        if code != 2 or not said or not all(line.startswith("error: ") for line in said) or \
                (command[0] != "report" and not any(case["field"] in line for line in said)):
            wrong.append((case["name"], code, said[:3]))
    assert not wrong, wrong
    assert not list(tmp_path.iterdir())
