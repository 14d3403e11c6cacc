"""The one way a public module of the package declares names imported on first use (so that
`import cosmos_outbox` at a Functions app's cold start imports only what the app uses).

    if TYPE_CHECKING:  # what type checkers read
        from cosmos_outbox._outbox import Outbox as Outbox

    _EXPORTS = {"Outbox": "cosmos_outbox._outbox"}  # what is imported at run time, by name
    __all__ = [*_EXPORTS]
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

Two declarations of one list, for two readers: the `TYPE_CHECKING` imports for type checkers
(`X as X`: re-exported), `_EXPORTS` for the interpreter (a name's module, or `module:attribute`
when the public name is another). `__all__` is `_EXPORTS`' names (and the module's own).
The package's tests/test_lazy_exports.py holds every such module's two to the same names and
modules. A renamed name may be kept for a release (`renamed`: it warns, `cosmos_outbox._renamed`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    module: str, exports: Mapping[str, str], *, renamed: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `module`: a name of `exports` is imported from its module
    when it is first read, and kept in `module`'s globals (read again at no cost); a name of
    `renamed` warns and gives its replacement; any other name is an AttributeError. `dir()`
    lists the module's `__all__`."""

    def __getattr__(name: str) -> Any:  # noqa: N807 (a module's __getattr__)
        where = exports.get(name)
        if where is None:
            from cosmos_outbox._renamed import renamed as deprecated_name

            return deprecated_name(module, name, renamed or {})
        path, _, attribute = where.partition(":")
        value = getattr(importlib.import_module(path), attribute or name)
        setattr(sys.modules[module], name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807 (a module's __dir__)
        return sorted(getattr(sys.modules[module], "__all__", exports))

    return __getattr__, __dir__
