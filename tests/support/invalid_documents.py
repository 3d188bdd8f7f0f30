"""Documents that must be refused (tests/data/invalid/*.yaml), each a change to examples/cluster-ladder.yaml with
the field its error names and what each half says: the unit tier runs every case through the parser, and the
cluster tier through a real API server, which refuses it too (`apiServer`) or, a rule its CEL cannot express,
accepts it (`cel`), leaving it to the parser."""

import copy

import yaml

from support.waiting import ROOT

CASES_DIR = ROOT / "tests" / "data" / "invalid"
KEYS = {"name", "base", "spec", "metadata", "field", "parser", "apiServer", "cel"}

# what a case's `base` changes in the ladder first
BASES = {
    "ladder": {},
    "search": {"stages": None, "thresholds": None, "slo": {"p99": "300ms"},
               "search": {"load": "users", "from": 10, "max": 200, "duration": "30s"}},
    "goal": {"stages": None, "thresholds": None, "slo": {"p99": "300ms"}, "goal": {"injectors": 2},
             "stageEnd": {"when": "Decided", "max": "1m"}, "matrix": {"threads": [1, 2]}},
}


def example(name):
    return yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())


def changed(node, changes):
    """Each change in place: a key is a dotted path (`stages.0.injectors`), its value replaces what is there, and
    None removes it."""
    for path, value in changes.items():
        *parents, last = [int(k) if k.isdigit() else k for k in path.split(".")]
        at = node
        for key in parents:
            at = at[key] if isinstance(key, int) else at.setdefault(key, {})
        if value is None:
            at.pop(last, None)
        else:
            at[last] = copy.deepcopy(value)
    return node


def document(base="ladder", spec=None, metadata=None):
    """The cluster ladder, changed by its base and then by these changes."""
    doc = example("cluster-ladder")
    changed(changed(doc["spec"], BASES[base]), spec or {})
    changed(doc["metadata"], metadata or {})
    return doc


def within(path, field):
    """Whether path is field or a field within it ("" is the document)."""
    return not field or path == field or path.startswith((f"{field}.", f"{field}["))


def case_document(case):
    return document(case.get("base", "ladder"), case.get("spec"), case.get("metadata"))


CASES = [case for path in sorted(CASES_DIR.glob("*.yaml")) for case in yaml.safe_load(path.read_text())]
EDGES = yaml.safe_load((ROOT / "tests" / "data" / "valid" / "edges.yaml").read_text())   # to be accepted
