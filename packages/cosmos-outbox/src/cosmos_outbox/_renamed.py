"""Public names that were renamed, kept for one release: using one warns (DeprecationWarning,
naming its replacement) and does what its replacement does. A public module lists its renamed
names in a table and hands its module `__getattr__` to `renamed`; a renamed method calls
`deprecated` and its replacement."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["REMOVED_IN", "MovedNames", "deprecated", "renamed"]

#: The release the names deprecated now are removed in (0.4's renames were kept one release
#: more, beside 0.5's moves to cosmos-outbox-operators and cosmos-outbox-testing).
REMOVED_IN = "0.6"


def deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that `old` (a method, a parameter) is deprecated for `new` (DeprecationWarning, at
    the caller of the deprecated name)."""
    warnings.warn(
        f"{old} is deprecated (removed in cosmos-outbox {REMOVED_IN}): use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def renamed(module: str, name: str, table: Mapping[str, str]) -> Any:
    """`module.name` as its replacement (`table[name]`, a dotted path), with a
    DeprecationWarning; AttributeError for a name that is not in the table. A replacement in
    another distribution (`cosmos_outbox_operators...`) is imported through `_moved`, which
    says which package to install when it is not."""
    replacement = table.get(name)
    if replacement is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated (removed in cosmos-outbox {REMOVED_IN}): use {replacement}",
        DeprecationWarning,
        stacklevel=3,
    )
    if not replacement.startswith("cosmos_outbox."):
        from cosmos_outbox._moved import moved_name

        return moved_name(replacement)
    path, _, attribute = replacement.rpartition(".")
    return getattr(importlib.import_module(path), attribute)


class MovedNames(Mapping[str, str]):
    """The table of a module whose every name went to `module` of a distribution that left the
    core (0.4's `cosmos_outbox.testing`: every name of `cosmos_outbox_testing`): each public
    name of `module` (its `__all__`, read when a name is first asked for) as `module.name`. The
    moved names are listed once, where they are; a name asked for where that distribution is
    not installed is the error that says which package to install."""

    def __init__(self, module: str) -> None:
        self.module = module

    def _names(self) -> list[str]:
        from cosmos_outbox._moved import moved_module

        return list(getattr(moved_module(self.module), "__all__", ()))

    def __getitem__(self, name: str) -> str:
        if name.startswith("_") or name not in self._names():
            raise KeyError(name)
        return f"{self.module}.{name}"

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())
