"""``funcstack split`` / ``merge`` / ``partitions`` as a user meets them: against the stack
``funcstack up`` runs from the same folder (found through what it keeps in ``.funcstack/``),
a container's physical partition is split, then merged, while the stack runs; what a user can
get wrong is one line naming the cause, exit status 1, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.cosmos import CosmosClient

from funcstack.cosmos import local_tls
from funcstack.deadlines import LONG, SHORT, DeadlineError, wait_for

pytestmark = pytest.mark.integration
CONFIG = """{
  "Cosmos": {"Databases": [{"Name": "shop", "Containers": [
    {"Name": "orders", "PartitionKey": "/customerId", "PhysicalPartitions": 2}]}]}
}"""


def funcstack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "funcstack", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=SHORT,  # one command against the running stack (or a refusal)
        check=False,
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("funcstack: ")]
    return line


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """``funcstack up`` running in a folder of its own (free ports): the folder, its output."""
    (tmp_path / "funcstack.json").write_text(CONFIG)
    process = subprocess.Popen(
        [sys.executable, "-m", "funcstack", "up", "--free-ports", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=0,
    )
    output: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        output.extend(line.rstrip("\n") for line in process.stdout)

    threading.Thread(target=read, daemon=True).start()

    def ready() -> bool:
        assert process.poll() is None, "funcstack up ended:\n" + "\n".join(output)
        return any(line.startswith('{"ready": true') for line in output)

    try:
        try:
            wait_for(ready, "funcstack up's ready line", LONG)
        except DeadlineError as exc:
            raise DeadlineError(f"{exc}:\n" + "\n".join(output)) from None
        yield tmp_path, output
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(SHORT)


def test_split_a_physical_partition_of_the_stack_running_from_this_folder(
    stack: tuple[Path, list[str]],
) -> None:
    folder, output = stack
    listed = funcstack(folder, "partitions", "shop", "orders")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == "shop/orders: 2 physical partition(s)"

    [ready] = [line for line in output if line.startswith('{"ready": true')]
    connection = json.loads(ready)["cosmos"]
    with CosmosClient.from_connection_string(connection, **local_tls().client_options()) as client:
        orders = client.get_database_client("shop").get_container_client("orders")
        for i in range(20):
            orders.create_item({"id": str(i), "customerId": f"c{i}"})

    split = funcstack(folder, "split", "shop", "orders", "--range", "1")
    assert split.returncode == 0, split.stderr
    lines = split.stdout.splitlines()
    assert lines[0] == (
        "shop/orders: range 1 split into 2, 3; requests naming 1 now answer "
        "410 / 1002 (PartitionKeyRangeGone)"
    )
    rows = [line.split() for line in lines[2:]]
    assert [row[0] for row in rows] == ["0", "2", "3"]
    assert sum(int(row[1]) for row in rows) == 20
    assert [row[-1] for row in rows] == ["-", "1", "1"]

    assert "No live partition key range '1'" in one_line(
        funcstack(folder, "split", "shop", "orders", "--range", "1")
    )

    merge = funcstack(folder, "merge", "shop", "orders", "--range", "2", "--range", "3")
    assert merge.returncode == 0, merge.stderr
    lines = merge.stdout.splitlines()
    assert lines[0] == (
        "shop/orders: ranges 2, 3 merged into 4; requests naming 2, 3 now answer "
        "410 / 1002 (PartitionKeyRangeGone)"
    )
    rows = [line.split(maxsplit=4) for line in lines[2:]]
    assert [row[0] for row in rows] == ["0", "4"]
    assert sum(int(row[1]) for row in rows) == 20
    assert rows[1][-1].split()[-3:] == ["1,", "2,", "3"]  # every range it came from
    assert "at least two" in one_line(funcstack(folder, "merge", "shop", "orders", "--range", "0"))
    assert "No container 'nope' in database 'shop'" in one_line(
        funcstack(folder, "partitions", "shop", "nope")
    )


def test_split_without_a_running_stack_is_one_line(tmp_path: Path) -> None:
    line = one_line(funcstack(tmp_path, "split", "shop", "orders"))
    assert "no stack runs from this folder" in line and "funcstack up" in line
    line = one_line(
        funcstack(tmp_path, "partitions", "shop", "orders", "--endpoint", "https://127.0.0.1:9/")
    )
    assert "cannot be reached" in line
