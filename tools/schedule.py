"""The test suite's xdist scheduling (`make test-suite`, `--dist loadfile`; tests/conftest.py's
`pytest_xdist_make_scheduler`): each module is a unit, as loadfile's (its tests share its
stack, one worker runs them), except cosmos-outbox's test folders whose modules run on the
package's session services (its tests/conftest.py, `funcstack_services`: Cosmos DB, Service Bus
and Azurite, which each worker that runs one of those modules starts): `GROUPS` is one unit, so
that one worker starts them (3 stand-ins), not one per worker that runs such a module. Its
modules stop, restart, freeze and fault those services one test at a time, as they did in two
units of their own (each of those services started once per unit); one unit runs them one after
another. One unit of about 310 s of wall time (the two were 168 s and 140 s on a quiet
machine), handed out first, is below a worker's share of the suite (about 480 s). The
Contacts' two modules that fault or freeze their Cosmos DB endpoint (the store's faults, the
Idempotency-Key under faults) are one unit too: they take turns on one endpoint of their
worker's (tests/conftest.py's `faulted_cosmos`), which each worker that ran one of them would
start; so are the two claim-check modules (the outbox's, which stops its Azurite once, then the
subscriber's) on their worker's Azurite (`claim_check_azurite`), with the scale-out chaos,
whose Service Bus endpoint answers 1.5 s late as the outbox claim check's killed relay's does
(`late_servicebus`).

xdist's own `--dist loadgroup` cannot say this: it names a grouped test `<nodeid>@<group>`,
which pytest 9's items no longer take (`Item.nodeid` is read-only), and it spreads every other
test one by one, their modules' stacks with them.

The units are handed out longest first (`LONG_UNITS`, then the rest by their number of tests,
as loadfile's `--loadscope-reorder` orders them): a long unit handed out last is the run's
tail, the other workers idle beside it. xdist hands units out in the order of the workers'
collection (the controller sends each worker the indexes of its tests in that collection), so
each worker puts its collection in that order (`longest_first`, from tests/conftest.py's
`pytest_collection_modifyitems`) and the scheduler keeps it. Ordered by number of tests alone,
the browser walk (20 tests, 95 s) and the relay's scale-out chaos (2 tests, 40 s) went out
late: the suite alone on its 3 workers ended at 315 s on one worker and 278 s on the two
others."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from xdist.scheduler import LoadScopeScheduling

__all__ = ["GROUPS", "LONG_UNITS", "FilesAndGroups", "longest_first", "unit"]

_PACKAGE = "packages/cosmos-outbox/tests/"
_ON_THE_SERVICES = "cosmos-outbox adapters, relay, scheduled events and test kit"
_ON_THE_FAULTED_COSMOS = "the Contacts' modules on the faulted Cosmos DB endpoint"
_ON_THE_CLAIM_CHECK_AZURITE = "the claim-check modules and the scale-out chaos"
#: The folders and modules whose modules are one unit each group (by the start of their node
#: ids).
GROUPS: dict[str, str] = {
    f"{_PACKAGE}adapters/": _ON_THE_SERVICES,
    f"{_PACKAGE}relay/": _ON_THE_SERVICES,
    f"{_PACKAGE}scheduled/": _ON_THE_SERVICES,
    f"{_PACKAGE}testing/": _ON_THE_SERVICES,
    "tests/contacts/store/test_cosmos_faults.py": _ON_THE_FAULTED_COSMOS,
    "tests/contacts/outbox/test_idempotency_key_under_faults.py": _ON_THE_FAULTED_COSMOS,
    # the outbox's first: its outage's restart is then in the module that started the Azurite
    "tests/contacts/outbox/test_claim_check.py": _ON_THE_CLAIM_CHECK_AZURITE,
    "tests/contacts/outbox/test_scale_out_chaos.py": _ON_THE_CLAIM_CHECK_AZURITE,
    "tests/subscriber/test_claim_check.py": _ON_THE_CLAIM_CHECK_AZURITE,
}


#: The units of 15 s or more, with their wall time in seconds on one of the suite's 3 workers
#: (the suite alone at d75b762, a quiet machine): handed out first, longest first. A unit
#: missing here goes after them; one named here that no longer exists fails
#: tests/tooling/test_schedule.py.
LONG_UNITS: dict[str, int] = {
    _ON_THE_SERVICES: 308,  # its two units' (168 s and 140 s), added
    "tests/contacts/outbox/test_console_in_a_browser.py": 95,
    "tests/contacts/outbox/test_outbox_guarantees.py": 67,
    _ON_THE_FAULTED_COSMOS: 66,  # the Idempotency-Key's 61 s and the store's faults' 5 s
    _ON_THE_CLAIM_CHECK_AZURITE: 101,  # the claim checks' 43 s and 18 s, the chaos' 40 s
    "tests/contacts/outbox/test_failures_in_a_browser.py": 45,  # its own stack (40-55 s, loaded)
    "tests/contacts/outbox/test_recovery_end_to_end.py": 41,
    "tests/subscriber/test_subscriber.py": 32,
    "tests/repository/test_docs_run.py": 31,
    "tests/contacts/outbox/test_operating_the_outbox.py": 28,
    "tests/tooling/test_make_run.py": 17,
    "tests/contacts/api/test_api_hostile.py": 16,
}


def longest_first[T](collection: Sequence[T], nodeid: Callable[[T], str]) -> list[T]:
    """`collection` (tests, `nodeid` giving each one's id) in the order their units are handed
    out: `LONG_UNITS` longest first, then the other units by their number of tests, most first;
    each unit's tests in their order (a stable sort: a module's tests stay together)."""
    units = [unit(nodeid(test)) for test in collection]
    tests = Counter(units)
    order = sorted(range(len(collection)), key=lambda i: _rank(units[i], tests))
    return [collection[i] for i in order]


def _rank(name: str, tests: Counter[str]) -> tuple[int, int]:
    return (-LONG_UNITS.get(name, 0), -tests[name])


def unit(nodeid: str) -> str:
    """The unit a test is scheduled in: its `GROUPS` folder's group, or its module."""
    module = nodeid.split("::", 1)[0]
    for folder, group in GROUPS.items():
        if module.startswith(folder):
            return group
    return module


class FilesAndGroups(LoadScopeScheduling):  # type: ignore[misc]  # xdist has no types
    """loadfile's scheduling, with `GROUPS` one unit each, handed out in the workers' collection
    order (`longest_first`'s), not re-sorted by their number of tests."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return unit(nodeid)
