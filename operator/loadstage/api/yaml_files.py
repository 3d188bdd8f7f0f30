"""Reading a YAML or JSON file a user gave: UTF-8 only, and strict YAML, where PyYAML alone would keep the last
of a key given twice and silently drop the first. Every refusal names the file, or the key's path and lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from loadstage.api.schema import ValidationError, key_path

MERGE_TAG = "tag:yaml.org,2002:merge"


def read_utf8(path: Path, name: str | None = None) -> str:
    name = name or str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValidationError([(name, f"cannot read: {e.strerror}")]) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValidationError([(name, f"is not UTF-8: byte 0x{data[e.start]:02x} at offset {e.start} "
                                      f"({e.reason}); save it as UTF-8")]) from None


def duplicate_keys(root: yaml.Node, source: str) -> list[tuple[str, str]]:
    """Each key given twice in one mapping, by its path and both lines. A node reached again through an alias is
    walked once, so that an alias bomb costs its size, not its expansion."""
    problems, seen_nodes, pending = [], set(), [(root, "")]
    while pending:
        node, path = pending.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            pending += [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == MERGE_TAG:
                    continue
                line = key.start_mark.line + 1
                if (key.tag, key.value) in first_line:
                    problems.append((key_path(path, key.value), f"is given twice in {source}, at lines "
                                     f"{first_line[key.tag, key.value]} and {line}; keep one"))
                else:
                    first_line[key.tag, key.value] = line
                pending.append((value, key_path(path, key.value)))
    return sorted(problems)


def load_documents(text: str, source: str) -> list[Any]:
    """Every document of `text`, none of them empty; raises ValidationError for invalid YAML (with its line and
    column) or a key given twice."""
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        documents = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None and (problems := duplicate_keys(node, source)):
                raise ValidationError(problems)
            if (document := loader.construct_document(node)) is not None:
                documents.append(document)
        return documents
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        said = getattr(e, "problem", None) or " ".join(str(e).split())
        raise ValidationError([(where, f"not valid YAML: {said}")]) from None
    finally:
        if loader is not None:
            loader.dispose()
