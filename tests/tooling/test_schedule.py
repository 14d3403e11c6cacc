"""The suite's xdist units (tools/schedule.py): a module each, except cosmos-outbox's modules on
its session services (`funcstack_services`), whose folders are two units, so that two workers
start those services, not three. A module on them outside those folders would be a unit of its
own, and its worker would start them once more: it is named here."""

from __future__ import annotations

import re
from pathlib import Path

from tools.schedule import GROUPS, unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_TESTS = ROOT / "packages" / "cosmos-outbox" / "tests"
#: A test module on the session's services: it asks for them, or for a fixture built on them
#: (the package's tests/conftest.py).
ON_THE_SERVICES = re.compile(
    r"\b(funcstack_services|funcstack_apps?|admin_database)\b|\bfresh: str\b"
)


def test_a_module_is_its_own_unit_and_a_grouped_folder_is_one() -> None:
    module = "tests/contacts/api/test_http_api.py"
    assert unit(f"{module}::test_x[a@b]") == unit(f"{module}::test_y") == module
    adapters = "packages/cosmos-outbox/tests/adapters/"
    assert unit(f"{adapters}test_a.py::test_x") == unit(f"{adapters}test_b.py::T::test_y")
    relay = "packages/cosmos-outbox/tests/relay/test_c.py::test_z"
    assert unit(relay) != unit(f"{adapters}test_a.py::test_x")
    assert unit("packages/cosmos-outbox/tests/http_api/test_d.py::t").endswith("test_d.py")
    assert len(set(GROUPS.values())) == 2


def test_every_module_on_the_session_services_is_in_a_group() -> None:
    assert all((ROOT / folder).is_dir() for folder in GROUPS), GROUPS
    outside = sorted(
        str(path.relative_to(ROOT))
        for path in PACKAGE_TESTS.rglob("test_*.py")
        if ON_THE_SERVICES.search(path.read_text("utf-8"))
        and unit(str(path.relative_to(ROOT))) == str(path.relative_to(ROOT))
    )
    assert outside == [], f"on funcstack_services, in no group of tools/schedule.py: {outside}"
