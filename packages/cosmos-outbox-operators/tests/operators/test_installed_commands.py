"""The operators' commands as a person meets them: the INSTALLED `cosmos-outbox` (the console
script beside this interpreter, found through the entry points this package was installed
with), not `main()`. The commands are named once (`cosmos_outbox_operators.cli._names`), the
entry points made from that list when the package is built (hatch_build.py): each top-level
command runs through the installed command, the parser declares exactly the listed commands,
and the core's `OPERATOR_COMMANDS` (what it names when this package is not installed) says the
same names. A global option (`--settings`, `--timeout`, `--json`, `--quiet`) is taken before the
command's name or after it."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from deadlines import SHORT

from cosmos_outbox.cli import CORE_COMMANDS, OPERATOR_COMMANDS
from cosmos_outbox_operators.cli import parser
from cosmos_outbox_operators.cli._commands import _RUN
from cosmos_outbox_operators.cli._names import CLI, COMMANDS

#: The console script the package's install put beside this interpreter (a venv's bin).
INSTALLED = Path(sys.executable).with_name("cosmos-outbox")
#: Every top-level command of the installed `cosmos-outbox`: the core's and this package's.
EVERY = sorted({*CORE_COMMANDS, *COMMANDS})


def installed(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command's run, from a shell that set none of the app's settings."""
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "SERVICEBUS"))}
    return subprocess.run(
        [str(INSTALLED), *args],
        capture_output=True,
        text=True,
        timeout=SHORT,
        check=False,
        cwd=cwd,
        env=shell,
    )


def test_every_top_level_command_runs_through_the_installed_command() -> None:
    """`cosmos-outbox <command> --help` answers its own usage, exit 0, for every command (a name
    missing from the entry points exits 2 with the list of commands: `operations` did)."""
    assert INSTALLED.exists(), f"no console script {INSTALLED}: is the package installed?"
    with ThreadPoolExecutor(max_workers=4) as pool:
        done = dict(zip(EVERY, pool.map(lambda n: installed(n, "--help"), EVERY), strict=True))
    refused = {
        name: (ran.returncode, ran.stderr.strip()[-300:])
        for name, ran in done.items()
        if ran.returncode != 0 or f"cosmos-outbox {name}" not in ran.stdout
    }
    assert not refused, (
        f"{INSTALLED} refuses these commands (an editable install made its entry points from an "
        f"older list of cli/_names.py: install the package again, `make setup`): {refused}"
    )


def test_the_command_list_names_every_command() -> None:
    ran = installed("--help")
    assert ran.returncode == 0, ran.stderr
    listed = ran.stdout.split("commands: ", 1)[1].splitlines()[0].split(", ")
    assert sorted(listed) == EVERY


def test_the_parser_and_the_core_say_the_listed_commands() -> None:
    """One list: the commands this package's parser declares and runs are the listed ones whose
    entry is `cosmos_outbox_operators.cli:main`, and the core names the same ones."""
    top = parser()
    [choices] = [a.choices for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    ours = {name for name, entry in COMMANDS.items() if entry == CLI}
    assert set(choices) == ours == set(_RUN)
    assert set(OPERATOR_COMMANDS) == set(COMMANDS), (
        "cosmos_outbox.cli.OPERATOR_COMMANDS (what the core names when this package is not "
        "installed) differs from cli/_names.py's COMMANDS: add the new names there"
    )
    assert not set(COMMANDS) & set(CORE_COMMANDS)


@pytest.mark.parametrize("where", ["before", "after"])
def test_the_global_settings_are_taken_before_or_after_the_command(
    where: str, tmp_path: Path
) -> None:
    """`--settings FILE` on either side of the command's name: the file is read (a file that
    lacks the outbox's container is refused naming it, exit 1), never a usage error (exit 2)."""
    settings = tmp_path / "local.settings.json"
    settings.write_text('{"IsEncrypted": false, "Values": {"SERVICEBUS_TOPIC": "t"}}')
    given = ["--settings", str(settings), "--timeout", "5"]
    args = [*given, "status"] if where == "before" else ["status", *given]
    ran = installed(*args, cwd=tmp_path)
    assert ran.returncode == 1, (ran.returncode, ran.stderr)
    assert "COSMOS_CONTAINER" in ran.stderr, ran.stderr
