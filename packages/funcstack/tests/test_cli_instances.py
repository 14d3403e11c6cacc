"""An app on instances under ``funcstack run``, driven from another terminal (``funcstack
instances``): a killed instance comes back while the stack keeps serving, and its Cosmos DB
leases move as docs/functions-host.md says (taken over once expired, balanced again when it is
back); ``run --json`` hands a script the URLs, ports and pids on stdout, alone; the banner says
each container's physical partitions and each trigger's lease intervals; what cannot be done is
one line and exit status 1. One stack for the whole module (a start costs about 10 s); its
tests run in order, each from where the last left it, the last stopping it."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from azure.cosmos import ContainerProxy, CosmosClient
from test_cli import Cli, one_line, run_once

from funcstack.cosmos import local_tls
from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for

pytestmark = pytest.mark.integration

#: An app with an HTTP function and a Cosmos DB trigger; its container has two physical
#: partitions (two leases), its settings short lease intervals (funcstack's local-only ones).
APP = """
import json
import logging
import os

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="whoami", methods=["GET"])
def whoami(req: func.HttpRequest) -> func.HttpResponse:
    me = {"instance": os.environ.get("WEBSITE_INSTANCE_ID", ""), "pid": os.getpid()}
    return func.HttpResponse(json.dumps(me), mimetype="application/json")


@app.cosmos_db_trigger(
    arg_name="docs",
    connection="CosmosConnection",
    database_name="shop",
    container_name="orders",
    lease_container_name="leases",
    feed_poll_delay=200,
)
def relay(docs: func.DocumentList) -> None:
    logging.info("relayed %d", len(docs))
"""
CONFIG = {
    "Cosmos": {
        "Databases": [
            {
                "Name": "shop",
                "Containers": [
                    {"Name": "orders", "PartitionKey": "/id", "PhysicalPartitions": 2},
                    {"Name": "leases", "PartitionKey": "/id", "DefaultTtl": -1},
                ],
            }
        ]
    }
}
SETTINGS = {
    "IsEncrypted": False,
    "Values": {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "CosmosConnection": "AccountEndpoint=https://localhost:8081/;AccountKey=a2V5;",
        "FUNCTIONS_HOST_COSMOS_LEASE_ACQUIRE_INTERVAL": "500",
        "FUNCTIONS_HOST_COSMOS_LEASE_RENEW_INTERVAL": "500",
        "FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL": "3000",
    },
}


@dataclass
class Running:
    """The stack and what its ``--json`` line said."""

    cli: Cli
    folder: Path
    ready: dict[str, Any]
    leases: ContainerProxy

    def instances(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``funcstack instances ...`` from another terminal (the same folder)."""
        return run_once(self.folder, "instances", *args)

    def listed(self) -> dict[str, dict[str, Any]]:
        done = self.instances("list", "--json")
        assert done.returncode == 0, done.stderr
        [app] = json.loads(done.stdout)["apps"]
        return {inst["name"]: inst for inst in app["instances"]}

    def owners(self) -> Counter[str]:
        """Leases per owner (``<instance>:<pid>:<random>``, cut to ``<instance>:<pid>``)."""
        return Counter(
            ":".join(str(doc.get("Owner") or "-").split(":")[:2])
            for doc in self.leases.query_items("SELECT * FROM c", enable_cross_partition_query=True)
            if "LeaseToken" in doc
        )

    def log(self, name: str) -> str:
        return (self.folder / ".funcstack" / f"{name}.log").read_text()


#: A non-event's window: an instance killed with --no-restart is still down after the restart
#: policy's delay (1 s) and a look of its supervisor (every 0.2 s). A wrong restart would show
#: as "restarting" from that look on, however slow the machine.
PAST_THE_RESTART_DELAY = 1.5


def get(url: str) -> int:
    try:
        # SHORT: a function's answer through the front (a host just back imports its app)
        with urllib.request.urlopen(url, timeout=SHORT) as reply:  # noqa: S310 - the local stack
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    folder = tmp_path_factory.mktemp("instances")
    app = folder / "relay"
    app.mkdir()
    (app / "function_app.py").write_text(APP)
    (app / "host.json").write_text(json.dumps({"version": "2.0"}))
    (app / "funcstack.json").write_text(json.dumps(CONFIG))
    (app / "local.settings.sample.json").write_text(json.dumps(SETTINGS))
    cli = Cli(
        folder,
        ["run", "--app", "relay", "--free-ports", "--json", "--instances", "2"],
        apart=True,
    ).start()
    try:
        ready = json.loads(cli.wait_for('{"ready": true'))
        client = CosmosClient.from_connection_string(
            ready["cosmos"], **local_tls().client_options()
        )
        leases = client.get_database_client("shop").get_container_client("leases")
        yield Running(cli, folder, ready, leases)
    finally:
        cli.kill()


def test_run_json_prints_one_line_on_stdout_and_the_banner_says_partitions_and_leases(
    running: Running,
) -> None:
    cli, ready = running.cli, running.ready
    cli.wait_for("Ctrl-C stops everything.", errors=True)
    assert cli.output == [json.dumps(ready)]  # stdout: the JSON line, nothing else
    url = ready["apps"]["relay"]
    assert ready["ports"]["relay"] == urlsplit(url).port
    # Service Bus and Azurite are not among them: they start at their first connection, and
    # nothing used them
    assert set(ready["pids"]) == {"funcstack", "cosmos", "relay-1", "relay-2"}
    assert ready["pids"]["funcstack"] == cli.process.pid  # type: ignore[union-attr]
    by_name = {inst["name"]: inst for inst in ready["instances"]["relay"]}
    assert by_name["relay-1"]["pid"] == ready["pids"]["relay-1"]
    assert by_name["relay-2"]["log"] == ".funcstack/relay-2.log"
    assert {"cosmos", "servicebus", "storage", "cosmos_endpoint"} <= set(ready)
    banner = "\n".join(cli.errors)
    assert "cosmos container shop/orders: created (2 physical partitions)" in banner
    assert "cosmos container shop/leases: created (1 physical partition)" in banner
    assert (
        "Cosmos DB trigger relay: shop/orders, leases in shop/leases; acquire 0.5 s, renew "
        "0.5 s, expiry 3 s (a killed instance's leases move within 3.5 s)" in banner
    )
    assert "funcstack instances [list|kill|pause|resume|add]" in banner
    assert get(url + "/whoami") == 200
    root = f"http://127.0.0.1:{ready['ports']['relay']}"
    assert get(root + "/admin/host/ping") == 200  # what a health probe calls, through the front
    control = running.folder / ".funcstack" / "control.json"
    assert stat.S_IMODE(control.stat().st_mode) == 0o600  # the user's only


def test_a_killed_instance_comes_back_while_the_stack_serves_and_its_lease_moves(
    running: Running,
) -> None:
    pids = running.ready["pids"]
    first, second = f"relay-1:{pids['relay-1']}", f"relay-2:{pids['relay-2']}"
    wait_for(lambda: running.owners() == Counter({first: 1, second: 1}), "a lease each", LONG)
    listed = running.listed()
    assert {name: inst["state"] for name, inst in listed.items()} == {
        "relay-1": "running",
        "relay-2": "running",
    }
    table = running.instances()
    assert table.returncode == 0 and table.stderr == ""
    assert table.stdout.splitlines()[0].startswith(
        f"relay  {running.ready['apps']['relay']}  (2 instance(s))"
    )

    killed = running.instances("kill", "relay-1")
    assert (killed.returncode, killed.stdout) == (
        0,
        f"relay-1 killed (pid {pids['relay-1']}); it comes back as after a crash\n",
    )
    url = running.ready["apps"]["relay"] + "/whoami"
    served: list[int] = []

    def back() -> bool:
        served.append(get(url))  # the stack keeps serving meanwhile
        inst = running.listed()["relay-1"]
        return bool(inst["state"] == "running" and inst["pid"] != pids["relay-1"])

    wait_for(back, "relay-1 back")
    assert set(served) == {200}, served
    again = running.listed()["relay-1"]
    assert (again["restarts"], again["last_exit"]) == (1, "killed by SIGKILL")
    running.cli.wait_for(
        "relay-1 was killed (killed by SIGKILL, asked); restarting it in 1 s", errors=True
    )
    running.cli.wait_for(f"relay-1 restarted (pid {again['pid']}", errors=True)
    pidfile = running.folder / ".funcstack" / "pids.json"

    def recorded() -> bool:  # the serving loop writes it again within half a second
        entries = json.loads(pidfile.read_text())
        return {"name": "relay-1", "pid": again["pid"]} in [
            {"name": e["name"], "pid": e["pid"]} for e in entries
        ]

    wait_for(recorded, "the new pid in pids.json")

    # its lease: never released (SIGKILL), taken once expired by whoever balanced first (the
    # survivor, or the instance back: a new owner), then a lease each again
    newcomer = f"relay-1:{again['pid']}"
    wait_for(
        lambda: running.owners() == Counter({newcomer: 1, second: 1}), "a lease each again", LONG
    )
    taken = f"acquired (expired, was {first}:"

    def logged() -> int:  # the line follows the lease's write that owners() saw
        return (running.log("relay-1") + running.log("relay-2")).count(taken)

    wait_for(logged, "the expired lease's acquisition logged", LOOPBACK)
    assert logged() == 1


def test_pause_resume_add_and_a_kill_for_good_from_another_terminal(running: Running) -> None:
    paused = running.instances("pause", "relay-2")
    assert paused.returncode == 0 and paused.stdout.startswith("relay-2 paused (pid ")
    assert running.listed()["relay-2"]["state"] == "paused"
    assert running.instances("resume", "relay-2").stdout.startswith("relay-2 resumed (pid ")
    assert running.listed()["relay-2"]["state"] == "running"
    added = running.instances("add", "relay")
    assert added.returncode == 0 and added.stdout.startswith("relay-3 added (pid "), added.stderr
    assert running.listed()["relay-3"]["state"] == "running"
    gone = running.instances("kill", "relay-3", "--no-restart")
    assert gone.stdout.endswith("it stays down (--no-restart)\n")
    time.sleep(PAST_THE_RESTART_DELAY)  # a non-event: it does not come back
    assert running.listed()["relay-3"]["state"] == "stopped"
    assert get(running.ready["apps"]["relay"] + "/whoami") == 200


def test_what_cannot_be_done_is_one_line_and_exit_status_1(
    running: Running, tmp_path: Path
) -> None:
    for args, said in (
        (("kill", "nosuch"), "no instance 'nosuch' in this stack (its instances: relay-1, "),
        (("pause", "relay-3"), "relay-3 is not running (stopped)"),
        (("add", "nope"), "no app 'nope' in this stack (its apps: relay)"),
        (("add", "relay", "--group", "http"), "relay: runs the whole app per instance; no "),
    ):
        line = one_line(running.instances(*args))
        assert line.startswith(f"funcstack: instances {args[0]}: ") and said in line, line
    line = one_line(run_once(tmp_path, "instances"))
    assert "no stack runs from this folder" in line and "funcstack run" in line
    # whoever cannot read the control file cannot act: a request without its token is refused
    document = json.loads((running.folder / ".funcstack" / "control.json").read_text())
    with socket.create_connection(("127.0.0.1", document["port"]), timeout=LOOPBACK) as connection:
        connection.sendall(b'{"command": "kill", "instance": "relay-2", "token": "guess"}\n')
        answer = json.loads(connection.makefile("rb").readline())
    assert answer == {"ok": False, "error": "refused: not this stack's token"}
    assert running.listed()["relay-2"]["state"] == "running"


def test_ctrl_c_stops_it_all_and_leaves_nothing(running: Running) -> None:
    cli = running.cli
    assert cli.interrupt() == 0, cli.text
    stopping = cli.errors.index("stopping...")
    assert "stopped in" in cli.errors[-1]
    # the instances it stops are not taken for crashed ones, and the apps' workers end
    # without their teardown's noise (an unclosed client's `TypeError ... not iterable`)
    assert not [line for line in cli.errors[stopping:] if "exited" in line or "restart" in line]
    assert "Traceback" not in cli.text and "TypeError" not in cli.text
    assert "Unclosed" not in cli.text
    assert len(cli.output) == 1  # still the JSON line alone on stdout
    assert cli.leftovers() == []
    state = running.folder / ".funcstack"
    assert not (state / "control.json").exists() and not (state / "pids.json").exists()
