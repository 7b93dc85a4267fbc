"""Dotted paths into a raw scenario (``workload.topics.0.partitions``): what ``--set`` and matrix
keys name, and what every error message names."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Free-form maps: the rest of a dotted path is one key (Kafka config names contain dots).
MAP_FIELDS = (("system", "extra"), ("matrix",))


def split_path(path: str) -> list[str]:
    """``system.extra.broker.session.timeout.ms`` -> ``["system", "extra", "broker.session.timeout.ms"]``."""
    parts = path.split(".")
    for prefix in MAP_FIELDS:
        n = len(prefix)
        if tuple(parts[:n]) == prefix and len(parts) > n:
            return [*parts[:n], ".".join(parts[n:])]
    return parts


def get_path(data: Any, path: str) -> Any:
    """The value at dotted ``path`` in a resolved scenario dict."""
    node = data
    for part in split_path(path):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def missing_segment(data: Any, parts: Sequence[str]) -> str | None:
    """First segment of ``parts`` that does not exist in a resolved scenario dict, else None.
    New keys are allowed at the end of a free-form map (``system.extra.<config>``)."""
    node = data
    for depth, part in enumerate(parts):
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, dict) and tuple(parts[:depth]) in MAP_FIELDS and depth == len(parts) - 1:
            return None
        else:
            return ".".join(parts[: depth + 1])
    return None


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``value`` at dotted ``path`` in a raw scenario dict (creating missing mappings).
    Numeric segments index lists. Raises ``KeyError`` with a reason on a bad path."""
    parts = split_path(path)
    if not path or any(p == "" for p in parts):
        raise KeyError("empty path segment")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        here = ".".join(parts[:depth]) or "<top>"
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise KeyError(f"{here} is a list of {len(node)}; {part!r} is not an index into it")
            idx: Any = int(part)
        elif isinstance(node, dict):
            idx = part
        else:
            raise KeyError(f"{here} is a {type(node).__name__}, not a section")
        if last:
            node[idx] = value
        else:
            if isinstance(node, dict) and node.get(idx) is None:
                node[idx] = {}
            node = node[idx]
