"""`cosmos-outbox`, the core's command: it runs the commands the installed distributions name in
the entry-point group `cosmos_outbox.commands`; an operators' command without
cosmos-outbox-operators says which package to install, and the list of commands says it too."""

from __future__ import annotations

import pytest

import cosmos_outbox.cli as cli


def test_an_operators_command_without_its_package_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    assert cli.main(["--settings", "local.settings.json", "status"]) == 2
    assert "pip install cosmos-outbox-operators" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "commands: relay" in out  # the core's own, always there
    assert "status" in out and "cosmos-outbox-operators" in out


def test_a_command_runs_with_the_whole_line(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], str]] = []

    def run(argv: list[str], *, prog: str) -> int:
        seen.append((argv, prog))
        return 0

    class Point:
        name = "status"

        def load(self) -> object:
            return run

    monkeypatch.setattr(cli, "entry_points", lambda group: [Point()])
    assert cli.main(["--settings", "s.json", "status", "--json"], prog="cosmos-outbox") == 0
    assert seen == [(["--settings", "s.json", "status", "--json"], "cosmos-outbox")]


def test_the_relay_process_reads_the_triggers_lease_interval_settings_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each interval from the first of: the command's flag, LEASE_*_INTERVAL_MS (the trigger's
    binding properties), the local host's FUNCTIONS_HOST_COSMOS_LEASE_*_INTERVAL, the
    processor's own; a renew interval not under the expiration interval refused, naming where
    each came from."""
    import inspect

    from cosmos_changefeed.aio import ChangeFeedProcessor
    from cosmos_outbox._relay_process.runner import relay_lease_intervals
    from cosmos_outbox.settings import SettingsError, load_settings

    monkeypatch.setenv(
        "CosmosDBConnection", "AccountEndpoint=https://a.documents.azure.com:443/;AccountKey=eA==;"
    )
    monkeypatch.setenv("COSMOS_CONTAINER", "events")
    monkeypatch.setenv("LEASE_EXPIRATION_INTERVAL_MS", "8000")
    monkeypatch.setenv("LEASE_RENEW_INTERVAL_MS", "2000")
    settings = load_settings()
    local = {
        "FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL": "700",
        "FUNCTIONS_HOST_COSMOS_LEASE_RENEW_INTERVAL": "900",
    }
    found = relay_lease_intervals(settings, local, lease_renew_interval=1.5)
    assert found == {
        "lease_acquire_interval": 0.7,  # the local host's
        "lease_expiration_interval": 8.0,  # the setting
        "lease_renew_interval": 1.5,  # the flag
    }
    own = inspect.signature(ChangeFeedProcessor).parameters["lease_acquire_interval"].default
    assert relay_lease_intervals(settings, {})["lease_acquire_interval"] == own
    with pytest.raises(SettingsError, match=r"\(9 s, --lease-renew-interval\).*\(8 s, LEASE_EXP"):
        relay_lease_intervals(settings, {}, lease_renew_interval=9.0)


def test_the_relays_lease_intervals_are_the_processors_own_unless_given() -> None:
    """The relay process restates no default of cosmos-changefeed's (issue 74): an interval not
    given is the processor's, read from it; one given wins; `--help` prints the processor's."""
    import inspect
    import io
    from contextlib import redirect_stdout

    from cosmos_changefeed.aio import ChangeFeedProcessor
    from cosmos_outbox._relay_process.runner import lease_intervals
    from cosmos_outbox.cli._relay import parser

    own = inspect.signature(ChangeFeedProcessor).parameters
    names = ("lease_renew_interval", "lease_acquire_interval", "lease_expiration_interval")
    assert lease_intervals(**dict.fromkeys(names)) == {n: own[n].default for n in names}
    assert lease_intervals(lease_renew_interval=2.5)["lease_renew_interval"] == 2.5
    shown = io.StringIO()
    with redirect_stdout(shown), pytest.raises(SystemExit):
        parser().parse_args(["--help"])
    assert f"[the processor's, {own['lease_renew_interval'].default:g}]" in shown.getvalue()
    assert parser().parse_args([]).lease_renew_interval is None
