"""The Cosmos DB trigger's binding read as the extension reads it, without an endpoint: start
options (and the listener's refusals, in the extension's words), the lease intervals (the
processor's defaults, the binding's, the local-only settings), the triggers that would share one
processor's leases. Which leases an instance takes is the processor package's
(packages/cosmos-changefeed/tests/test_balancing.py holds the cases this file held)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path
from typing import Any, cast

import pytest

from funcstack.deadlines import LOOPBACK
from funcstack.functions_host._config import HostJson
from funcstack.functions_host._cosmos_trigger.listener import CosmosTriggerListener
from funcstack.functions_host._cosmos_trigger.mode import change_feed_mode_refusal
from funcstack.functions_host._cosmos_trigger.options import CosmosTriggerOptions, shared_leases
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._launcher import RunnerStartError, start_runner
from funcstack.functions_host._listener import HostServices

BINDING = {
    "type": "cosmosDBTrigger",
    "name": "docs",
    "connection": "CosmosDBConnection",
    "databaseName": "db",
    "containerName": "items",
}
NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def options(**binding: Any) -> CosmosTriggerOptions:
    return CosmosTriggerOptions.from_binding({**BINDING, **binding})


@pytest.mark.parametrize(
    ("binding", "start", "error"),
    [
        ({}, "Now", None),
        ({"startFromBeginning": True}, "Beginning", None),
        ({"startFromBeginning": "false"}, "Now", None),
        (
            {"startFromTime": "2021-02-16T14:19:29Z"},
            dt.datetime(2021, 2, 16, 14, 19, 29, tzinfo=dt.UTC),
            None,
        ),
        (
            {"startFromTime": "2021-02-16T16:19:29+02:00"},
            dt.datetime(2021, 2, 16, 14, 19, 29, tzinfo=dt.UTC),
            None,
        ),
        # DateTime.TryParse without a zone: DateTimeKind.Unspecified, which the processor refuses
        (
            {"startFromTime": "2021-02-16T14:19:29"},
            "Now",
            "StartTime cannot have DateTimeKind.Unspecified (Parameter 'value')",
        ),
        (
            {"startFromTime": "16 Feb"},
            "Now",
            "The specified StartFromTime parameter is not in the correct format. Please use the "
            "ISO 8601 format with the UTC designator. For example: '2021-02-16T14:19:29Z'.",
        ),
        (
            {"startFromTime": "2021-02-16T14:19:29Z", "startFromBeginning": True},
            "Now",
            "Only one of StartFromBeginning or StartFromTime can be used",
        ),
        (
            {"leaseContainerName": "ITEMS"},
            "Now",
            "The monitored container cannot be the same as the container storing the leases.",
        ),
    ],
)
def test_start_options_as_the_extension_reads_them(
    binding: dict[str, Any],
    start: object,
    error: str | None,
) -> None:
    read = options(**binding)
    assert (read.start_time, read.start_error) == (start, error)


def test_a_listener_that_refuses_to_start_says_why_and_the_host_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = FunctionSpec(
        "relay",
        "id-1",
        {**BINDING, "startFromBeginning": True, "startFromTime": "2021-02-16T14:19:29Z"},
        (),
        None,
    )
    host = HostServices(cast(LanguageWorker, None), lambda: None, HostJson(), "host")
    listener = CosmosTriggerListener(spec, host)
    with caplog.at_level(logging.ERROR):
        listener.start()  # no task, no client: nothing runs
    assert caplog.messages == [
        "The listener for function 'Functions.relay' was unable to start: Only one of "
        "StartFromBeginning or StartFromTime can be used"
    ]
    # the host is ready without it, naming it as not listening
    why = asyncio.run(asyncio.wait_for(listener.wait_listening(), LOOPBACK))
    assert why == "Only one of StartFromBeginning or StartFromTime can be used"
    assert not listener.is_listening


def test_lease_intervals_the_processors_defaults_the_bindings_and_the_local_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = options()
    # ChangeFeedLeaseOptions: acquire 13 s, renew 17 s, expiration 60 s (as the trigger's
    # reference, CosmosDBv4TriggerOptions, gives them)
    assert (read.acquire_interval, read.renew_interval, read.expiration_interval) == (
        13.0,
        17.0,
        60.0,
    )
    assert read.feed_poll_delay == 5.0
    read = options(
        leaseAcquireInterval=1000, leaseRenewInterval="2000", leaseExpirationInterval=0
    )  # 0: the default
    assert (read.acquire_interval, read.renew_interval, read.expiration_interval) == (
        1.0,
        2.0,
        60.0,
    )
    monkeypatch.setenv("FUNCTIONS_HOST_COSMOS_LEASE_EXPIRATION_INTERVAL", "5000")
    assert options().expiration_interval == 5.0
    assert options(leaseExpirationInterval=7000).expiration_interval == 7.0  # the binding wins


def spec(name: str, **binding: Any) -> FunctionSpec:
    return FunctionSpec(name, f"id-{name}", {**BINDING, **binding}, (), None)


def test_triggers_sharing_one_processors_leases_are_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CosmosDBConnection", "AccountEndpoint=https://a/;AccountKey=k;")
    monkeypatch.setenv("OtherName", "AccountEndpoint=https://a/;AccountKey=k;")
    found = shared_leases(
        [
            spec("relay"),
            spec("audit", connection="OtherName"),  # the same account
            spec("own", leaseContainerPrefix="own."),  # a prefix of its own
            spec("elsewhere", containerName="other"),  # another monitored container
            FunctionSpec("web", "id-web", {"type": "httpTrigger"}, (), None),
        ]
    )
    assert [(first, second) for first, second, _ in found] == [("relay", "audit")]


@pytest.mark.parametrize(
    ("mode", "refused"),
    [
        (None, None),
        ("", None),
        ("LatestVersion", None),
        ("latestversion", None),  # an enum read from JSON: any case
        ("AllVersionsAndDeletes", "would miss every delete"),
        ("allVersionsAndDeletes", "would miss every delete"),
        ("FullFidelity", "is not a change feed mode"),
    ],
)
def test_the_change_feed_mode_latest_version_is_served_all_versions_and_deletes_refused(
    mode: str | None, refused: str | None
) -> None:
    binding = dict(BINDING) if mode is None else {**BINDING, "changeFeedMode": mode}
    reason = change_feed_mode_refusal("relay", binding)
    if refused is None:
        assert reason is None
    else:
        assert reason is not None
        assert reason.startswith("function relay: the Cosmos DB trigger's change_feed_mode ")
        assert "(changeFeedMode)" in reason and refused in reason


ALL_VERSIONS_APP = """
import azure.functions as func

app = func.FunctionApp()


@app.route(route="ping", auth_level=func.AuthLevel.ANONYMOUS)
def ping(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("pong")


@app.cosmos_db_trigger(
    arg_name="docs",
    connection="CosmosDBConnection",
    database_name="shop",
    container_name="orders",
    change_feed_mode=func.CosmosDBChangeFeedMode.ALL_VERSIONS_AND_DELETES,
)
def audit_deletes(docs: func.DocumentList) -> None:
    pass
"""


@pytest.mark.integration
def test_a_trigger_asking_for_all_versions_and_deletes_stops_the_hosts_start(
    tmp_path: Path,
) -> None:
    """Refused when the app is indexed, naming the function, the setting and why: the host
    does not start (no endpoint is needed: nothing is read), rather than serve a trigger that
    would never see a delete."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(ALL_VERSIONS_APP)
    try:
        started = start_runner(
            app_dir=app,
            settings={"CosmosDBConnection": "AccountEndpoint=https://127.0.0.1:9/;AccountKey=k;"},
            log_path=tmp_path / "host.log",
        )
    except RunnerStartError as refused:
        reason = str(refused)
    else:
        started.stop()
        pytest.fail("the host started")
    assert reason.startswith(
        "function audit_deletes: the Cosmos DB trigger's change_feed_mode (changeFeedMode) "
        "'AllVersionsAndDeletes' is not served by funcstack"
    ), reason
    assert "\n" not in reason
    assert "Traceback" not in (tmp_path / "host.log").read_text()
