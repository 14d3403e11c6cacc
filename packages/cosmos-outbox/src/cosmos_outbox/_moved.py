"""What left the core in 0.5, and the only module of the core that names where it went: the
operators' routes, console and command line are cosmos-outbox-operators
(`cosmos_outbox_operators`), the test kit cosmos-outbox-testing (`cosmos_outbox_testing`). The
core imports neither (the repository's tests/repository/test_distributions.py holds it, and
allows this module by name): the deprecated paths kept for 0.5 reach them here, by name, at run
time, and a missing distribution is an error that says which package to install.

Removed in 0.6 with the paths it serves: `Outbox.function_app(operators=...)`,
`Outbox.operators_blueprint(...)`, `cosmos_outbox.operators`, `cosmos_outbox.cli`'s operators'
names, `cosmos_outbox.testing` and `cosmos_outbox.testing.contracts`."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

__all__ = [
    "DISTRIBUTIONS",
    "OPERATORS",
    "TESTING",
    "MovedError",
    "installed",
    "moved_module",
    "moved_name",
]

#: The import names of the distributions that left the core.
OPERATORS, TESTING = "cosmos_outbox_operators", "cosmos_outbox_testing"
#: Each one's distribution (what `pip install` takes).
DISTRIBUTIONS = {OPERATORS: "cosmos-outbox-operators", TESTING: "cosmos-outbox-testing"}


class MovedError(ImportError):
    """What moved is in a distribution that is not installed: its message names it."""


def installed(package: str) -> bool:
    """Whether `package` (one of `DISTRIBUTIONS`) can be imported."""
    return importlib.util.find_spec(package) is not None


def moved_module(module: str) -> ModuleType:
    """`module` of a distribution that left the core (MovedError naming the package to install
    when it is not there)."""
    top = module.partition(".")[0]
    if top not in DISTRIBUTIONS:
        raise ValueError(f"{module} is not of a distribution that left cosmos-outbox")
    if not installed(top):
        raise MovedError(
            f"{module} is in the {DISTRIBUTIONS[top]} package since cosmos-outbox 0.5: "
            f"pip install {DISTRIBUTIONS[top]}"
        )
    return importlib.import_module(module)


def moved_name(dotted: str) -> Any:
    """The object `dotted` (`package.module.name`) names in a distribution that left the core."""
    module, _, name = dotted.rpartition(".")
    return getattr(moved_module(module), name)
