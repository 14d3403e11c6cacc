"""The test stack's shape (tools/stack.py): by default the contacts app on one host and its
container with the physical partitions tools/funcstack.json declares, as every test had it;
scaled out and with more partitions only when a test asks (the scale-out chaos test). No
servers: what the stack would start with."""

from __future__ import annotations

from pathlib import Path

import pytest

from funcstack.config import StackConfig
from tools.provision import declared
from tools.stack import Stack, with_partitions


def partitions(stack_config: StackConfig | None) -> dict[str, int]:
    assert stack_config is not None
    return {
        c.name: c.physical_partitions for db in stack_config.cosmos.databases for c in db.containers
    }


def test_by_default_one_host_and_the_declared_partitions(tmp_path: Path) -> None:
    stack = Stack(workdir=tmp_path)
    assert not stack.scaled_out and stack.runner_app is None
    assert stack.contacts_partitions is None
    assert partitions(stack.config) == partitions(declared())


def test_more_partitions_for_the_contacts_container_only() -> None:
    changed = with_partitions(declared(), "contacts", 4)
    assert partitions(changed) == {**partitions(declared()), "contacts": 4}
    assert partitions(declared())["contacts"] == 1  # the declared config is left as it is
    with pytest.raises(ValueError, match="no container 'nope' declared"):
        with_partitions(declared(), "nope", 4)


def test_a_scaled_out_app_is_started_as_instances_not_as_one_host(tmp_path: Path) -> None:
    stack = Stack(workdir=tmp_path, runner_instances={"http": 2, "function:relay_events": 3})
    assert stack.scaled_out
    stack.settings_file = tmp_path / "local.settings.json"
    with pytest.raises(ValueError, match="start_runner_app"):
        stack.start_runner()


def test_the_contacts_container_is_named_before_the_stack_starts(tmp_path: Path) -> None:
    assert Stack(workdir=tmp_path).contacts_container_name == "contacts"
    renamed = Stack(workdir=tmp_path, settings_overrides={"COSMOS_CONTAINER": "other"})
    assert renamed.contacts_container_name == "other"
