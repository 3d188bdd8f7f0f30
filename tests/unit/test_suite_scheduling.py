"""How scripts/test divides a run (tests/support/scheduling.py): a worker's kwok cluster goes down once the
worker moves past the cluster tier."""

from pathlib import Path
from types import SimpleNamespace

from support import scheduling

ROOT = Path(__file__).parents[2]


class Definition:
    def __init__(self):
        self.finished = 0

    def finish(self, request):
        self.finished += 1


def item(tier):
    return SimpleNamespace(path=ROOT / "tests" / tier / "test_x.py", config=SimpleNamespace(rootpath=ROOT))


def test_the_cluster_goes_down_after_the_workers_last_cluster_test_and_only_then(monkeypatch):
    definition = Definition()
    monkeypatch.setattr(scheduling, "session_cluster", [definition, "request"])
    scheduling.pytest_runtest_teardown(item("cluster"), item("cluster"))
    assert definition.finished == 0
    scheduling.pytest_runtest_teardown(item("cluster"), None)   # the session's end takes it down
    assert definition.finished == 0
    scheduling.pytest_runtest_teardown(item("cluster"), item("e2e"))
    assert definition.finished == 1 and scheduling.session_cluster == []
    scheduling.pytest_runtest_teardown(item("e2e"), item("unit"))   # once
    assert definition.finished == 1
