"""The suite's xdist units (tools/schedule.py): a module each, except cosmos-outbox's modules on
its session services (`funcstack_services`), whose folders are one unit, so that one worker
starts those services, not one per worker that runs such a module, and the Contacts' modules
on the faulted Cosmos DB endpoint and on the claim-check Azurite (tests/conftest.py's
`faulted_cosmos`, `claim_check_azurite`), a unit each for the same reason. A module on either
outside its group would be a unit of its own, and its worker would start them once more: it is
named here."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tools.schedule import GROUPS, LONG_UNITS, longest_first, unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_TESTS = ROOT / "packages" / "cosmos-outbox" / "tests"
#: A test module on the session's services: it asks for them, or for a fixture built on them
#: (the package's tests/conftest.py).
ON_THE_SERVICES = re.compile(
    r"\b(funcstack_services|funcstack_apps?|admin_database)\b|\bfresh: str\b"
)


def test_a_module_is_its_own_unit_and_a_grouped_folder_is_one() -> None:
    module = "tests/contacts/model/test_domain.py"
    assert unit(f"{module}::test_x[a@b]") == unit(f"{module}::test_y") == module
    package = "packages/cosmos-outbox/tests/"
    adapters = unit(f"{package}adapters/test_dead_letters.py::test_x")
    assert unit(f"{package}adapters/test_azure_adapters.py::T::test_y[aio]") == adapters
    relay = unit(f"{package}relay/test_relay.py::test_z")
    assert relay == unit(f"{package}scheduled/test_on_funcstack.py::T::test_w") == adapters
    in_memory = f"{package}http_api/test_idempotency.py"
    assert unit(f"{in_memory}::test_v") == in_memory
    faults = unit("tests/contacts/store/test_cosmos_faults.py::test_a")
    idempotency = "tests/contacts/outbox/test_idempotency_key_under_faults.py"
    assert unit(f"{idempotency}::test_b") == faults != adapters
    outbox, subscriber = "tests/contacts/outbox", "tests/subscriber"
    claim_check = unit(f"{outbox}/test_claim_check.py::test_c")
    assert unit(f"{subscriber}/test_claim_check.py::test_d") == claim_check != faults
    assert len(set(GROUPS.values())) == 3


def test_every_module_on_the_session_services_is_in_a_group() -> None:
    assert all((ROOT / name).exists() for name in GROUPS), GROUPS
    outside = sorted(
        str(path.relative_to(ROOT))
        for path in PACKAGE_TESTS.rglob("test_*.py")
        if ON_THE_SERVICES.search(path.read_text("utf-8"))
        and unit(str(path.relative_to(ROOT))) == str(path.relative_to(ROOT))
    )
    assert outside == [], f"on funcstack_services, in no group of tools/schedule.py: {outside}"


@pytest.mark.parametrize("fixture", ["faulted_cosmos", "claim_check_azurite", "late_servicebus"])
def test_every_module_on_a_worker_endpoint_of_a_group_is_in_that_group(fixture: str) -> None:
    """tests/conftest.py's endpoints that some modules take turns on, one per worker."""
    modules = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(rf"\b{fixture}: \w+\b", path.read_text("utf-8"))
    )
    assert len(modules) > 1, modules
    assert len({unit(module) for module in modules}) == 1, modules
    assert all(unit(module) != module for module in modules), modules


def test_the_long_units_go_first_longest_first_a_units_tests_together_in_their_order() -> None:
    package = "packages/cosmos-outbox/tests/"
    collection = [
        "tests/contacts/model/test_domain.py::test_1",
        "tests/contacts/outbox/test_scale_out_chaos.py::test_1",
        "tests/contacts/outbox/test_scale_out_chaos.py::test_2",
        "tests/repository/test_layering.py::test_1",
        "tests/repository/test_layering.py::test_2",
        "tests/repository/test_layering.py::test_3",
        f"{package}relay/test_relay.py::test_1",
        "tests/contacts/outbox/test_console_in_a_browser.py::test_1",
        f"{package}scheduled/test_on_funcstack.py::test_1",
        f"{package}relay/test_relay.py::test_2",
    ]
    assert longest_first(collection, str) == [
        f"{package}relay/test_relay.py::test_1",
        f"{package}scheduled/test_on_funcstack.py::test_1",
        f"{package}relay/test_relay.py::test_2",
        "tests/contacts/outbox/test_scale_out_chaos.py::test_1",  # its unit: the claim checks'
        "tests/contacts/outbox/test_scale_out_chaos.py::test_2",
        "tests/contacts/outbox/test_console_in_a_browser.py::test_1",
        "tests/repository/test_layering.py::test_1",
        "tests/repository/test_layering.py::test_2",
        "tests/repository/test_layering.py::test_3",
        "tests/contacts/model/test_domain.py::test_1",
    ]


def test_every_long_unit_named_is_a_group_or_a_module_that_exists() -> None:
    """A module renamed or removed would leave its long unit at the end of the queue."""
    missing = [
        name for name in LONG_UNITS if name not in GROUPS.values() and not (ROOT / name).is_file()
    ]
    assert missing == [], f"tools/schedule.py's LONG_UNITS names what is not there: {missing}"


def test_a_units_endpoint_starts_once_and_stops_with_the_unit() -> None:
    """tests/conftest.py's `UnitEndpoints`: one start for the unit's modules; after the unit's
    end (`close`), a module that asks again gets a new one."""
    from tests.conftest import UnitEndpoints

    started: list[int] = []
    stopped: list[int] = []

    def start() -> tuple[int, Callable[[], None]]:
        n = len(started)
        started.append(n)
        return n, lambda: stopped.append(n)

    endpoints = UnitEndpoints()
    assert endpoints.get("late", start) == endpoints.get("late", start) == 0
    assert (started, stopped) == ([0], [])
    endpoints.close()
    assert stopped == [0]
    assert endpoints.get("late", start) == 1
