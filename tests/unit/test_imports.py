"""What a module costs to import: the command line answers `history check` and `report FILE` without the
Kubernetes client, numpy, scipy, psycopg or matplotlib (each is imported where it is used: 0.2 s for the
Kubernetes client alone), and the operator starts without numpy (OpenBLAS starts a thread per core)."""

import json
import subprocess
import sys

import pytest

HEAVY = ("kubernetes", "numpy", "scipy", "psycopg", "matplotlib")


def imported(module: str) -> list[str]:
    """The HEAVY modules a fresh interpreter has loaded after importing `module`."""
    probe = f"import json, sys, {module}; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    return json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                                     check=True).stdout)


@pytest.mark.parametrize("module", ["loadstage.cli", "loadstage.cli.history", "loadstage.history.store"])
def test_the_command_line_imports_no_heavy_library_until_it_needs_one(module):
    assert imported(module) == []


def test_the_operator_starts_without_numpy():
    assert "numpy" not in imported("loadstage.edge.handlers")
