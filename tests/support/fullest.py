"""A status with every field the declaration has (api.status), each set: what a test writes through the API server
to prove nothing is pruned, and reads back to prove the reader and the writer agree."""

import dataclasses

from loadstage.api.schema import Bool, Int, Json, ListOf, MapOf, Num, Obj, Pair, Str
from loadstage.api.status import STATUS, RunStatus, VariantRecord
from loadstage.api.status.stage import LostInjectors


def example(node, name="x"):
    """A value of `node` with every field set (each list and map with one item)."""
    if isinstance(node, Pair):   # an OpenPair too
        return (1.5, 2.5)
    if isinstance(node, LostInjectors):
        return (example(node.item),)
    if isinstance(node, ListOf):
        return [example(node.item)]
    if isinstance(node, Obj):
        if node.keyed:
            values = {key: example(sub, key) for key, sub in node.fields.items()}
            return node.read(values, "example") if node.cls is dict else node.cls(**values)
        values = {node.attr(key): example(field.node, key) for key, field in node.wire.items() if not field.derived}
        made = node.cls(**{k: tuple(v) if k in node._tuple_attrs() and isinstance(v, list) else v
                           for k, v in values.items()})
        return dataclasses.replace(made, judged=True) if isinstance(made, VariantRecord) else made
    if isinstance(node, MapOf):
        return {"GET": example(node.value)}
    if isinstance(node, Str):
        return node.enum[-1] if node.enum else f"{name} text"
    if isinstance(node, Bool):
        return True
    if isinstance(node, Int):
        return 3
    if isinstance(node, Num):
        return 0.5 if node.below is not None else 2.5
    if isinstance(node, Json):
        return {"any": [1, "two"]}
    raise TypeError(f"no example of {node!r}")


def fullest_status() -> RunStatus:
    """Every field set, and consistent where the reader checks it: a bracket in order (its load at the objective
    inside it), indices of its variant."""
    status = example(STATUS)
    assert isinstance(status, RunStatus)
    (variant,) = status.variants
    variant.index = 0
    passed = variant.search.passed
    variant.search = dataclasses.replace(variant.search, near=passed + 1, failed=passed + 2)
    pick = status.recommendation
    status.recommendation = dataclasses.replace(
        pick, winner=dataclasses.replace(pick.winner, variant=0), runner_up=dataclasses.replace(pick.runner_up,
                                                                                                  variant=0),
        front=tuple(dataclasses.replace(c, variant=0) for c in pick.front), order=(0,))
    return status
