"""The test stack's shape (tools/stack.py): by default the contacts app on one host and its
container with the physical partitions tools/funcstack.json declares, as every test had it;
scaled out and with more partitions only when a test asks (the scale-out chaos test). No
servers: what the stack would start with."""

from __future__ import annotations

from pathlib import Path

import pytest

from funcstack.config import StackConfig
from funcstack.services import Azurite
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


def test_make_run_prints_the_consoles_url_and_turns_its_sign_in_on(tmp_path: Path) -> None:
    """`make run`'s banner names the operators' console, which its stack can sign in to
    (funcstack's stand-in for App Service Authentication, with a secret of its own)."""
    from types import SimpleNamespace

    from tools.stack import Ports, banner, run_settings

    running = SimpleNamespace(
        api_url="http://127.0.0.1:7071/api",
        subscriber=SimpleNamespace(url="http://127.0.0.1:7072/api"),
        cosmos=None,
        ports=Ports(),
    )
    assert "Console      http://127.0.0.1:7071/api/outbox/console" in banner(running)  # type: ignore[arg-type]
    settings = run_settings(tmp_path / "otel")
    assert settings["FUNCSTACK_SIGN_IN"] == "true"
    assert settings["FUNCSTACK_SIGN_IN_ROLES"] == "Outbox.Operator"  # proposed by the form
    assert settings["OUTBOX_CONSOLE_SIGN_IN"] == "local-stand-in"  # believed on a local host
    assert len(settings["FUNCSTACK_SIGN_IN_SECRET"]) >= 24
    assert (
        run_settings(tmp_path)["FUNCSTACK_SIGN_IN_SECRET"] != settings["FUNCSTACK_SIGN_IN_SECRET"]
    )


def test_a_shared_azurite_is_not_the_stacks_to_stop_nor_started_beside_its_own(
    tmp_path: Path,
) -> None:
    """`Stack(shared_azurite=...)` (the claim check's killed relay on its module stack's
    Azurite, which tests/contacts/outbox/test_claim_check.py checks is left running, its own
    container deleted): refused before anything starts."""
    other = Azurite(ports=(1, 2, 3), handed=True)  # another stack's: nothing listens here
    stack = Stack(workdir=tmp_path, shared_azurite=other)
    with pytest.raises(ValueError, match="shared: not its to stop"):
        stack.stop_part("azurite")
    both = Stack(workdir=tmp_path, shared_azurite=other, with_azurite=True)
    with pytest.raises(ValueError, match="with_azurite would start an Azurite of its own"):
        both.start()
    assert both.cosmos is None and both.azurite is None  # nothing started
