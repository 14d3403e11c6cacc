"""The test suite's xdist scheduling (`make test-suite`, `--dist loadfile`; tests/conftest.py's
`pytest_xdist_make_scheduler`): each module is a unit, as loadfile's (its tests share its
stack, one worker runs them), except cosmos-outbox's test folders whose modules run on the
package's session services (its tests/conftest.py, `funcstack_services`: Cosmos DB, Service Bus
and Azurite, which each worker that runs one of those modules starts): each of `GROUPS` is one
unit, so that two workers start them, not all three. Two units, not one: each is about 200 s of
wall time, a worker's share of the suite about 480 s (one unit of 400 s would end last).

xdist's own `--dist loadgroup` cannot say this: it names a grouped test `<nodeid>@<group>`,
which pytest 9's items no longer take (`Item.nodeid` is read-only), and it spreads every other
test one by one, their modules' stacks with them."""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

__all__ = ["GROUPS", "FilesAndGroups", "unit"]

_PACKAGE = "packages/cosmos-outbox/tests/"
#: The folders whose modules are one unit each group (by the start of their node ids).
GROUPS: dict[str, str] = {
    f"{_PACKAGE}adapters/": "cosmos-outbox adapters",
    f"{_PACKAGE}relay/": "cosmos-outbox relay, scheduled events and test kit",
    f"{_PACKAGE}scheduled/": "cosmos-outbox relay, scheduled events and test kit",
    f"{_PACKAGE}testing/": "cosmos-outbox relay, scheduled events and test kit",
}


def unit(nodeid: str) -> str:
    """The unit a test is scheduled in: its `GROUPS` folder's group, or its module."""
    module = nodeid.split("::", 1)[0]
    for folder, group in GROUPS.items():
        if module.startswith(folder):
            return group
    return module


class FilesAndGroups(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no types
    """loadfile's scheduling, with `GROUPS` one unit each."""

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)
