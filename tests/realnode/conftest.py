import pytest

from support.waiting import ROOT


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed real-node test's report carries the node's state at that moment; the whole of it is kept."""
    report = yield
    node = item.funcargs.get("node") if report.when == "call" and report.failed else None
    if node is not None:
        try:
            account = node.evidence(ROOT / "artifacts" / "realnode" / f"{item.originalname}-evidence.txt")
        except Exception as e:  # noqa: BLE001  the failure itself is what the report is for
            account = f"the node's state could not be read: {e}"
        report.sections.append(("the real node after the failure", account))
    return report
