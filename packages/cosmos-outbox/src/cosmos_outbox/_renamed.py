"""Public names that were renamed, kept for one release: reading one warns (DeprecationWarning,
naming its replacement) and gives the replacement. A public module lists its renamed names
in a table and hands its module `__getattr__` to `renamed`."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["renamed"]


def renamed(module: str, name: str, table: Mapping[str, str]) -> Any:
    """`module.name` as its replacement (`table[name]`, a dotted path), with a
    DeprecationWarning; AttributeError for a name that is not in the table."""
    replacement = table.get(name)
    if replacement is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated (removed in cosmos-outbox 0.4): use {replacement}",
        DeprecationWarning,
        stacklevel=3,
    )
    path, _, attribute = replacement.rpartition(".")
    return getattr(importlib.import_module(path), attribute)
