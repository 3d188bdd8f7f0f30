"""Experiment files as a careless user writes them: a key given twice, bytes that are not UTF-8, an alias bomb,
and (Hypothesis) any document at all, or a valid one changed at random. Each ends in the experiment or in
errors that name a field, a path or the file: never another exception."""

import string

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from loadstage.api.load import load_experiment_file, parse_experiment
from loadstage.api.schema import ValidationError
from loadstage.api.types import Experiment
from loadstage.api.yaml_files import load_documents
from support.waiting import ROOT

EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def refusal(path):
    with pytest.raises(ValidationError) as e:
        load_experiment_file(path)
    return e.value.problems


def test_a_key_given_twice_is_refused_with_its_path_and_both_lines(write_experiment):
    path = write_experiment(
        "apiVersion: loadstage.io/v1alpha1\n"        # 1
        "kind: LoadExperiment\n"                     # 2
        "metadata: {name: demo}\n"                   # 3
        "spec:\n"                                    # 4
        "  target: {pods: 2}\n"                      # 5
        "  stages:\n"                                # 6
        "    - injectors: 1\n"                       # 7
        "      duration: 10s\n"                      # 8
        "      injectors: 3\n"                       # 9
        "  target: {pods: 1, workers: 4}\n")         # 10
    assert refusal(path) == [
        ("spec.stages[0].injectors", f"is given twice in {path}, at lines 7 and 9; keep one"),
        ("spec.target", f"is given twice in {path}, at lines 5 and 10; keep one")]


def test_a_merge_key_and_an_anchor_used_twice_are_no_duplicates(write_experiment):
    path = write_experiment(
        "apiVersion: loadstage.io/v1alpha1\nkind: LoadExperiment\nmetadata: {name: demo}\n"
        "spec:\n"
        "  stages:\n"
        "    - &step {injectors: 1, duration: 10s}\n"
        "    - {<<: *step, injectors: 2}\n"
        "    - *step\n")
    assert [s.injectors for s in load_experiment_file(path).spec.stages] == [1, 2, 1]


def test_a_file_that_is_not_utf8_is_refused_naming_the_byte_and_its_offset(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("apiVersion: loadstage.io/v1alpha1\nmetadata: {name: café}\n".encode("latin-1"))
    assert refusal(path) == [(str(path), "is not UTF-8: byte 0xe9 at offset 54 (invalid continuation byte); "
                                         "save it as UTF-8")]


def test_an_alias_bomb_is_refused_at_once(write_experiment):
    """A billion laughs: nine levels of nine aliases, 10^9 strings if expanded."""
    levels = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    path = write_experiment("apiVersion: loadstage.io/v1alpha1\nkind: LoadExperiment\nmetadata: {name: demo}\n"
                            "bombs:\n" + "".join(f"  {line}\n" for line in levels) +
                            "spec:\n  target: {command: *a9}\n  stages: [{injectors: 1, duration: 10s}]\n")
    problems = refusal(path)
    assert ("bombs", "unknown field (known: apiVersion, kind, metadata, spec)") in problems
    assert any(field.startswith("spec.target.command") for field, _ in problems), problems


def assert_named(problems):
    assert problems and all(isinstance(where, str) and where and message for where, message in problems)


yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**12), st.floats(allow_nan=True),
                         st.text(max_size=12))
yaml_values = st.recursive(yaml_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=10), st.integers()), inner,
                                                 max_size=4)), max_leaves=12)


@given(yaml_values)
@example({"": None})                      # found by Hypothesis: an empty key was shown as an empty path
def test_any_document_is_an_experiment_or_named_errors(doc):
    try:
        assert isinstance(parse_experiment(doc), Experiment)
    except ValidationError as e:
        assert_named(e.problems)


FIELD_PATHS = [("spec",), ("spec", "stages"), ("spec", "stages", 0), ("spec", "stages", 0, "duration"),
               ("spec", "target"), ("spec", "injectors"), ("spec", "matrix"), ("spec", "thresholds"),
               ("spec", "redis"), ("spec", "warmup"), ("metadata",), ("metadata", "name")]


@given(st.sampled_from(FIELD_PATHS), yaml_values, st.sampled_from(EXAMPLES))
def test_a_valid_experiment_with_one_field_replaced_is_an_experiment_or_named_errors(where, value, example):
    doc = yaml.safe_load(example.read_text())
    node = doc
    for step in where[:-1]:
        node = node[step] if isinstance(node, list) or step in node else node.setdefault(step, {})
    if isinstance(node, (list, dict)):
        node[where[-1]] = value
    try:
        parse_experiment(doc)
    except ValidationError as e:
        assert_named(e.problems)


def changed(text, changes):
    for at, cut, put in changes:
        at %= len(text) + 1
        text = text[:at] + put + text[at + cut:]
    return text


@given(st.sampled_from(EXAMPLES), st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 8),
                                                    st.text(string.printable, max_size=6)), min_size=1, max_size=4))
@example(EXAMPLES[0], [(0, 0, "\x0c")])   # found by Hypothesis: a control character raised PyYAML's ReaderError
def test_a_valid_file_changed_byte_by_byte_is_an_experiment_or_named_errors(example_file, changes):
    text = changed(example_file.read_text(), changes)
    try:
        documents = load_documents(text, "experiment.yaml")
        if len(documents) == 1:
            parse_experiment(documents[0])
    except ValidationError as e:
        assert_named(e.problems)
