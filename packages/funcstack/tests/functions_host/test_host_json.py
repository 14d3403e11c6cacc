"""host.json read as the Azure host reads it (``_host_json.py``): keys in any case (.NET
configuration is case-insensitive), ``AzureFunctionsJobHost__*`` app settings over the file, the
``version`` check with the host's messages, the ``functions`` allow list; and one warning line
per key funcstack does not honour or does not know, naming it. Last, a real host: a
``"RoutePrefix"`` in host.json is its route prefix, and its log names what it does not honour."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from funcstack.functions_host._config import HostJson
from funcstack.functions_host._functions import specs_from_metadata
from funcstack.functions_host._host_json import RULES, HostJsonError
from funcstack.functions_host._launcher import start_runner
from funcstack.functions_host._rpc import protos
from funcstack.functions_host._servicebus_trigger import ServiceBusTriggerOptions
from funcstack.functions_host.testing import call

REPOSITORY = Path(__file__).resolve().parents[4]
HERE = Path(__file__).resolve().parent


def load(
    tmp_path: Path, document: dict[str, Any] | str, environ: dict[str, str] | None = None
) -> HostJson:
    text = document if isinstance(document, str) else json.dumps(document)
    (tmp_path / "host.json").write_text(text)
    return HostJson.load(tmp_path, environ or {})


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_the_keys_funcstack_reads_are_read_in_any_case(tmp_path: Path) -> None:
    host = load(
        tmp_path,
        {
            "version": "2.0",
            "Extensions": {
                "HTTP": {"RoutePrefix": "v2"},
                "serviceBUS": {
                    "MaxConcurrentSessions": 3,
                    "SESSIONIDLETIMEOUT": "00:00:01",
                    "autocompletemessages": False,
                },
            },
            "FunctionTimeout": "00:00:07",
            "RETRY": {"Strategy": "fixedDelay", "MAXRETRYCOUNT": 2, "delayinterval": "00:00:03"},
        },
    )
    assert host.route_prefix == "v2"
    assert host.function_timeout == 7.0
    binding = {"type": "serviceBusTrigger", "connection": "C", "queueName": "q"}
    options = ServiceBusTriggerOptions.from_binding(binding, host.service_bus)
    assert (
        options.max_concurrent_sessions,
        options.session_idle_timeout,
        options.auto_complete,
    ) == (3, 1.0, False)
    assert host.retry == {"strategy": "fixedDelay", "maxRetryCount": 2, "delayInterval": "00:00:03"}


def test_of_two_spellings_of_one_key_the_later_wins_as_in_the_hosts_flattening(
    tmp_path: Path,
) -> None:
    host = load(
        tmp_path,
        '{"version": "2.0", "extensions": {"http": {"routePrefix": "a"}},'
        ' "Extensions": {"Http": {"ROUTEPREFIX": "b"}}}',
    )
    assert host.route_prefix == "b"


def test_app_settings_override_host_json_as_in_azure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    environ = {
        "AzureFunctionsJobHost__extensions__http__routePrefix": "from-setting",
        "azurefunctionsjobhost__FUNCTIONTIMEOUT": "00:00:09",
        "AzureFunctionsJobHost__concurrency__dynamicConcurrencyEnabled": "true",
    }
    with caplog.at_level(logging.WARNING):
        host = load(
            tmp_path, {"version": "2.0", "extensions": {"http": {"routePrefix": "x"}}}, environ
        )
    assert (host.route_prefix, host.function_timeout) == ("from-setting", 9.0)
    assert warnings(caplog) == [
        "app setting AzureFunctionsJobHost__concurrency__dynamicConcurrencyEnabled: concurrency "
        "(dynamicConcurrencyEnabled) is not honoured by funcstack: " + RULES["concurrency"].why
    ]


def test_one_warning_line_per_key_funcstack_does_not_honour_naming_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        load(
            tmp_path,
            {
                "version": "2.0",
                "concurrency": {
                    "dynamicConcurrencyEnabled": True,
                    "snapshotPersistenceEnabled": True,
                },
                "watchDirectories": ["Shared"],
                "logging": {
                    "logLevel": {"default": "Warning"},
                    "applicationInsights": {"samplingSettings": {"isEnabled": True}},
                },
                "extensions": {
                    "cosmosDb": {"connectionMode": "Gateway"},
                    "serviceBus": {
                        "prefetchCount": 10,
                        "maxConcurrentCalls": 4,
                        "clientRetryOptions": {"mode": "Exponential", "maxRetries": 3},
                    },
                    "http": {"routePrefix": "api", "maxConcurrentRequests": 5, "routPrefix": "x"},
                    "durableTask": {"hubName": "h"},
                },
                "extensionBundle": {
                    "id": "Microsoft.Azure.Functions.ExtensionBundle",
                    "version": "[4.*, 5.0.0)",
                },
                "id": "9f4ea53c5136457d883d685e57164f08",
            },
        )
    lines = warnings(caplog)
    named = [line.split(" is not ", 1)[0].removeprefix("host.json: ") for line in lines]
    assert named == [
        "concurrency (dynamicConcurrencyEnabled, snapshotPersistenceEnabled)",
        "watchDirectories",
        "extensions.cosmosDB (connectionMode)",
        "extensions.serviceBus.prefetchCount",
        "extensions.serviceBus.clientRetryOptions (mode, maxRetries)",
        "extensions.http.maxConcurrentRequests",
        "extensions.http.routPrefix",
        "extensions.durableTask (hubName)",
        "id",
    ]
    assert "extensions.http.routPrefix is not a host.json setting funcstack knows" in lines[6]
    assert lines[4].endswith(
        "is not honoured by funcstack: the local Service Bus trigger uses "
        "the Python SDK's retry defaults"
    )


def test_the_repositorys_host_json_files_hold_only_keys_funcstack_honours(
    caplog: pytest.LogCaptureFixture,
) -> None:
    if not (REPOSITORY / "function_app.py").is_file():
        pytest.skip("not in the repository funcstack comes from")
    patterns = [
        "host.json",
        "subscriber/host.json",
        "examples/*/host.json",
        "packages/*/tests/*/host.json",
        "packages/*/tests/apps/*/host.json",
    ]
    folders = [path.parent for pattern in patterns for path in REPOSITORY.glob(pattern)]
    assert len(folders) >= 6
    with caplog.at_level(logging.WARNING):
        for folder in folders:
            HostJson.load(folder, {})
    assert warnings(caplog) == []


def test_a_missing_or_wrong_version_stops_the_host_with_its_message(tmp_path: Path) -> None:
    with pytest.raises(
        HostJsonError,
        match=r"The host.json file is missing the required "
        r"'version' property",
    ):
        load(tmp_path, {"extensions": {}})
    with pytest.raises(
        HostJsonError,
        match=r"'3.0' is an invalid value for host.json 'version' "
        r"property .*This does not correspond to the "
        r"function runtime version",
    ):
        load(tmp_path, {"version": "3.0"})
    with pytest.raises(HostJsonError, match="Unable to parse host configuration file"):
        load(tmp_path, "{not json")
    with pytest.raises(HostJsonError, match=r"extensions\.http\.routePrefix: a string"):
        load(tmp_path, {"version": "2.0", "extensions": {"http": {"routePrefix": 1}}})
    assert load(tmp_path, {}) == HostJson()  # an empty file: the defaults, as the host writes


def test_the_functions_allow_list_keeps_only_the_functions_it_names_ignoring_case() -> None:
    pb = protos()

    def metadata(name: str) -> Any:
        binding = json.dumps({"type": "httpTrigger", "name": "req", "direction": "IN"})
        return pb.RpcFunctionMetadata(name=name, function_id=f"id-{name}", raw_bindings=[binding])

    listed = [metadata("Orders"), metadata("health"), metadata("status")]
    kept = specs_from_metadata(listed, HostJson(functions=("orders", "HEALTH")))
    assert [spec.name for spec in kept] == ["Orders", "health"]
    assert len(specs_from_metadata(listed, HostJson())) == 3


@pytest.mark.integration
def test_a_host_serves_under_a_route_prefix_spelled_in_any_case_and_logs_what_it_ignores(
    tmp_path: Path,
) -> None:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(HERE / "sample_http_app.py", app_dir / "function_app.py")
    (app_dir / "host.json").write_text(
        json.dumps(
            {
                "version": "2.0",
                "Extensions": {"Http": {"RoutePrefix": "v1"}},
                "singleton": {"lockPeriod": "00:00:15"},
            }
        )
    )
    log = tmp_path / "host.log"
    runner = start_runner(
        app_dir=app_dir, settings={"SAMPLE_SETTING": "s", "SAMPLE_ROUTE": "r"}, log_path=log
    )
    try:
        assert runner.url.endswith("/v1")
        assert call(f"{runner.url}/setting").body == b"s"
    finally:
        runner.stop()
    assert (
        "host.json: singleton (lockPeriod) is not honoured by funcstack: no singleton locks"
        in log.read_text()
    )


def test_the_docs_list_every_key_funcstack_knows() -> None:
    text = (HERE.parents[1] / "docs" / "functions-host.md").read_text("utf-8")
    table = text[text.index("## host.json") : text.index("## Like the host")]
    for dotted in RULES:
        parent, _, name = dotted.rpartition(".")
        assert f"`{dotted}`" in table or (f"`{parent}." in table and f"`{name}`" in table), dotted
