"""Apache Otava's change points on benchmark (k)'s series, for comparison (benchmarks/regression_gate.py --otava).

Runs in a venv of its own: `apache-otava` 0.8.0 pins numpy 2.2 and scipy < 1.17, which loadstage's venv does not
hold. Reads {"series": [{"values": [...], "higherIsWorse": bool, "checks": [i, ...]}, ...], "recent": 5,
"minChange": 0.05} on stdin; for each series, whether Otava's `compute_change_points` with its defaults, on the
first i values at any check, puts a change point among the newest `recent` runs that makes the figure worse by
`minChange` or more (the gate's rule, on Otava's change points). Prints a JSON list of booleans.

    /tmp/otava-venv/bin/python benchmarks/otava_gate.py < series.json
"""

import json
import sys

from otava.analysis import compute_change_points


def worse(values: list[float], higher_is_worse: bool, recent: int, min_change: float) -> bool:
    points, _ = compute_change_points(values)
    if not points or len(values) - points[-1].index > recent:
        return False
    change = points[-1].stats.mean_2 / points[-1].stats.mean_1 - 1
    return (change >= min_change) if higher_is_worse else (change <= -min_change)


def main() -> int:
    asked = json.load(sys.stdin)
    print(json.dumps([any(worse(s["values"][:i], s["higherIsWorse"], asked["recent"], asked["minChange"])
                          for i in s["checks"]) for s in asked["series"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
