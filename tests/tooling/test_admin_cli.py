"""The operators' CLI as this repository runs it (`python -m tools.admin`: the package's
`cosmos-outbox` on the Contacts app's outbox, with `make run`'s settings or `--settings`, and
`--contact-id`): settings it cannot use are one line on stderr and a non-zero exit, never a
traceback (the command in a process of its own, as `make` and a person run it); and its
answers from the local stack's stores (its `main(argv)` in this process: what it prints and
returns is the command's, without an interpreter and the SDKs' imports a run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from funcstack.deadlines import SHORT
from tools.admin import main
from tools.stack import Stack

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def admin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.admin", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SHORT,  # a hang guard: the command refuses its settings before any call
        check=False,
        env=env,
    )


def admin_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`python -m tools.admin ARGS` run by its `main` in this process: (exit code, stdout,
    stderr)."""
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exited:  # argparse's usage errors
        code = exited.code if isinstance(exited.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def test_settings_it_cannot_use_are_one_line(tmp_path: Path) -> None:
    settings = tmp_path / "local.settings.json"
    settings.write_text(json.dumps({"IsEncrypted": False, "Values": {}}), "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    done = admin("--settings", str(settings), "status", env=env)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("error: ") and "COSMOS_CONTAINER" in done.stderr


def test_the_local_stacks_status_is_printed_for_a_person_and_as_json(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = str(stack.settings_file)
    code, out, err = admin_here(capsys, "--settings", settings, "--timeout", "30", "status")
    assert code == 0, err
    assert out.startswith("pending ")
    code, out, err = admin_here(capsys, "--settings", settings, "--json", "status")
    assert code == 0, err
    assert {"pending", "quarantined", "leases"} <= set(json.loads(out))


def test_a_redrive_is_scoped_by_aggregate_type_and_id(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    since = ("--since", "2999-01-01T00:00:00Z")
    settings = ("--settings", str(stack.settings_file), "--timeout", "30")
    scoped = ("--aggregate-type", "ticket", "--aggregate-id", "t-1")
    code, out, err = admin_here(capsys, *settings, "--json", "redrive", *since, *scoped)
    assert code == 0, err
    report = json.loads(out)
    assert (report["events"], report["accepted"], report["quarantined"]) == (0, 0, 0)
    code, out, err = admin_here(
        capsys, *settings, "--json", "redrive", *since, "--contact-id", "t-1"
    )
    assert code == 0 and json.loads(out)["events"] == 0, err
    code, out, err = admin_here(capsys, *settings, "redrive", *since, "--aggregate-id", "t-1")
    assert code == 1 and "aggregateId needs aggregateType" in err
