"""Lazy public names for funcstack's packages: each ``__init__.py`` names where its public names
live, and a name's module is imported when the name is first used (PEP 562's module
``__getattr__`` and ``__dir__``). The language worker and the pytest plugin import these
packages: they pay only for what they use.

A package writes::

    __getattr__, __dir__ = lazy_exports(__name__, __all__, {"Name": "funcstack.module", ...})

Not an Azure behaviour: the Azure SDK for Python re-exports its public names from its
packages' ``__init__.py`` in the same way (``azure/servicebus/__init__.py``), eagerly.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_call", "lazy_exports"]


def lazy_exports(
    package: str, public: Iterable[str], where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package``: each name of ``where`` is
    imported from its module when first used; any other name is an ``AttributeError`` naming
    the package. ``public`` (the package's ``__all__``) must hold every name of ``where``:
    a name that would resolve without being public is refused at import."""
    table = dict(where)
    listed = list(public)
    unlisted = sorted(set(table) - set(listed))
    if unlisted:
        raise ImportError(f"{package}: lazy names missing from __all__: {', '.join(unlisted)}")

    def __getattr__(name: str) -> Any:  # noqa: N807 - PEP 562's name
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:  # noqa: N807 - PEP 562's name
        return sorted(set(listed) | set(sys.modules[package].__dict__))

    return __getattr__, __dir__


def lazy_call(module: str, name: str) -> Callable[..., Any]:
    """A callable that calls ``module.name``, importing ``module`` at its first call: a
    trigger's listener or a binding's class, whose SDK a host without one never loads."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__qualname__ = call.__name__ = f"{name} (from {module})"
    return call
