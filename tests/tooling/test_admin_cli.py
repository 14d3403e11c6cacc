"""The operators' CLI as this repository runs it (`python -m tools.admin`: the package's
`cosmos-outbox` on the Contacts app's outbox, with `make run`'s settings or `--settings`, and
`--contact-id`): settings it cannot use are one line on stderr and a non-zero exit, never a
traceback; and its answers from the local stack's stores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.stack import Stack

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def admin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.admin", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_settings_it_cannot_use_are_one_line(tmp_path: Path) -> None:
    settings = tmp_path / "local.settings.json"
    settings.write_text(json.dumps({"IsEncrypted": False, "Values": {}}), "utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    done = admin("--settings", str(settings), "status", env=env)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("error: ") and "COSMOS_CONTAINER" in done.stderr


def test_the_local_stacks_status_is_printed_for_a_person_and_as_json(stack: Stack) -> None:
    settings = str(stack.settings_file)
    done = admin("--settings", settings, "--timeout", "30", "status")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pending ")
    as_json = admin("--settings", settings, "--json", "status")
    assert {"pending", "quarantined", "leases"} <= set(json.loads(as_json.stdout))


def test_a_redrive_is_scoped_by_aggregate_type_and_id(stack: Stack) -> None:
    since = ("--since", "2999-01-01T00:00:00Z")
    settings = ("--settings", str(stack.settings_file), "--timeout", "30")
    scoped = ("--aggregate-type", "ticket", "--aggregate-id", "t-1")
    done = admin(*settings, "--json", "redrive", *since, *scoped)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["events"], report["accepted"], report["quarantined"]) == (0, 0, 0)
    by_alias = admin(*settings, "--json", "redrive", *since, "--contact-id", "t-1")
    assert by_alias.returncode == 0 and json.loads(by_alias.stdout)["events"] == 0
    refused = admin(*settings, "redrive", *since, "--aggregate-id", "t-1")
    assert refused.returncode == 1 and "aggregateId needs aggregateType" in refused.stderr
