"""The status, declared once (api.status): the CRD's status schema, the reader and the writer all come from one
declaration, and nothing a run writes can be pruned by the API server without a test failing."""

import dataclasses
import json

import pytest

from loadstage.api import conformance
from loadstage.api.crd import build_crd, render_crd
from loadstage.api.schema import Obj, ShapeError, Written
from loadstage.api.status import STATUS, RunStatus
from loadstage.api.status import run as run_status
from support.documents import stored_result
from support.fullest import fullest_status

STORED = {name: stored_result(name)
          for name in ("quickstart.yaml", "servers.json", "paced.yaml")}


def objects(node, path="status"):
    """Every object of the declaration, with its path."""
    if isinstance(node, Obj):
        yield path, node
        for key, sub in node.fields.items():
            yield from objects(sub, f"{path}.{key}")
    for child in ("item", "value"):
        if hasattr(node, child):
            yield from objects(getattr(node, child), f"{path}[]" if child == "item" else f"{path}{{}}")


def walk(schema, path="status"):
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from walk(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], f"{path}{{}}")


def test_the_crds_status_schema_is_the_declarations_closed_and_described_everywhere():
    crd_status = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert crd_status == STATUS.openapi()
    places = dict(walk(crd_status))
    assert len(places) > 300
    assert [p for p, s in places.items() if s.get("x-kubernetes-preserve-unknown-fields")] == []
    assert [p for p, s in places.items() if not s.get("description")] == []
    assert [p for p, s in places.items() if s.get("type") == "object" and not
            ({"properties", "additionalProperties"} & set(s))] == []


def test_every_attribute_of_a_status_type_is_declared_so_none_is_dropped_on_its_way_out():
    """A dataclass attribute its Obj does not declare would be lost at the next write, without a word."""
    set_on_read = {"VariantRecord": {"judged"}}    # read from whether `capacity` is present (VARIANT's on_read)
    for path, node in objects(STATUS):
        if node.keyed:
            assert node.cls is dict or set(node.cls.__annotations__) == set(node.fields), path
            continue
        declared = {node.attr(key) for key, field in node.wire.items() if not field.derived}
        attributes = {f.name for f in dataclasses.fields(node.cls)} if dataclasses.is_dataclass(node.cls) \
            else set(node.cls._fields)
        assert attributes - declared == set_on_read.get(node.cls.__name__, set()), path
        assert declared <= attributes, path
        if issubclass(node.cls, Written):
            assert node.cls.__wire__.wire is node.wire, f"{path}: {node.cls.__name__} has more than one declaration"


def test_no_key_of_the_crd_reads_as_a_boolean_in_yaml_1_1():
    """kubectl and Helm read YAML 1.1, where a plain `n:` is false: latencyMs.n would be pruned (it was)."""
    import re
    plain = re.compile(r"^\s*(?:- )?(y|yes|n|no|on|off|true|false):", re.IGNORECASE | re.MULTILINE)
    text = render_crd()
    assert plain.findall(text) == []
    assert "'n':" in text


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_stored_status_is_read_and_written_back_as_it_was(name):
    status = STORED[name]["status"]
    assert RunStatus.read(status).to_status() == status


def test_the_fullest_status_is_written_and_read_back_unchanged():
    status = fullest_status()
    document = status.to_status()
    assert not conformance.violations(STATUS.openapi(), document, "status")
    assert RunStatus.read(json.loads(json.dumps(document))).to_status() == document
    assert len(list(walk(STATUS.openapi()))) == len(set(_places(document)) | {"status"})


def _places(value, path="status"):
    """The schema path of every value in a document (one item per list and map)."""
    if isinstance(value, dict):
        keyed = len(value) == 1 and "GET" in value
        for key, item in value.items():
            at = f"{path}{{}}" if keyed else f"{path}.{key}"
            yield at
            yield from _places(item, at)
    elif isinstance(value, list):
        for item in value:
            yield f"{path}[]"
            yield from _places(item, f"{path}[]")


def test_a_field_the_crd_lacks_fails_the_write_with_the_audit_on(monkeypatch):
    """What the tests set (LOADSTAGE_AUDIT_STATUS): a status the API server would prune is refused, naming the
    field, before anything is written."""
    schema = STATUS.openapi()
    stage = schema["properties"]["variants"]["items"]["properties"]["stages"]["items"]
    del stage["properties"]["looks"]
    monkeypatch.setattr(run_status, "_crd_schema", lambda: schema)
    status = fullest_status()
    with pytest.raises(ValueError, match=r"status.variants\[0\].stages\[0\].looks: not declared"):
        status.to_status()
    monkeypatch.delenv(conformance.AUDIT_ENV)
    assert "looks" in status.to_status()["variants"][0]["stages"][0]


def test_a_key_a_typed_mapping_does_not_declare_is_refused_on_the_way_out():
    status = fullest_status()
    status.progress = {**status.progress, "attempts": 2}
    with pytest.raises(ShapeError, match=r"status.progress.attempts: is not declared"):
        status.to_status()
    status.progress = {"stage": 3}
    with pytest.raises(ShapeError, match=r"status.progress.stage: must be a string, got 3"):
        status.to_status()


def test_a_status_with_a_value_of_the_wrong_kind_is_refused_naming_its_path():
    document = fullest_status().to_status()
    document["variants"][0]["search"]["reason"] = "Guessed"
    with pytest.raises(ShapeError) as refused:
        RunStatus.read(document)
    assert str(refused.value) == ("status.variants[0].search.reason: must be one of Searching, Found, Near, "
                                  "CeilingPassed, FloorFailed, InjectorBound, Exhausted, got 'Guessed'")


def test_every_field_the_declaration_lets_be_null_is_optional_in_its_type():
    """Else a null in a file would be read into a field the code takes for set (a report's traceback: Hypothesis
    found a null durationSeconds so)."""
    import dataclasses
    import typing

    from loadstage.api.schema import ListOf, MapOf, Obj

    wrong, seen = [], set()

    def walk(node, path):
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, Obj):
            if dataclasses.is_dataclass(node.cls) and not node.keyed:
                hints = typing.get_type_hints(node.cls)
                for key, field in node.wire.items():
                    attr = node.attr(key)
                    if not field.derived and field.node.nullable and attr in hints and \
                            type(None) not in typing.get_args(hints[attr]):
                        wrong.append(f"{path}.{key}")
            for key, sub in node.fields.items():
                walk(sub, f"{path}.{key}")
        elif isinstance(node, ListOf):
            walk(node.item, f"{path}[]")
        elif isinstance(node, MapOf):
            walk(node.value, f"{path}{{}}")
    walk(STATUS, "status")
    assert not wrong, wrong
