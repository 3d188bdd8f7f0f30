import pytest

from support.waiting import ROOT


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed real-node test's report carries the node's state at that moment (the whole of it is kept), and
    its experiments are deleted."""
    report = yield
    node = item.funcargs.get("node") if report.when == "call" and report.failed else None
    if node is not None:
        try:
            account = node.evidence(ROOT / "artifacts" / "realnode" / f"{item.originalname}-evidence.txt")
        except Exception as e:
            account = f"the node's state could not be read: {e}"
        report.sections.append(("the real node after the failure", account))
        # what the failed test left running would hold the node's CPU from the tests after it
        node.kubectl("delete", "lx", "--all", "--all-namespaces", "--timeout=90s")
    return report
