"""Library API, route templates and retry policies of the local host."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from funcstack.functions_host import Runner
from funcstack.functions_host._config import HostJson
from funcstack.functions_host._functions import specs_from_metadata
from funcstack.functions_host._http_host import check_route_template
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._retry import RetryPolicy, parse_timespan
from funcstack.functions_host._routing import RouteTable, RouteTemplateError, compile_route
from funcstack.functions_host.testing import call

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent


@pytest.fixture
def in_process_runner(tmp_path: Path) -> Iterator[Runner]:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(HERE / "sample_http_app.py", app_dir / "sample_in_process_app.py")
    (app_dir / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"http": {"routePrefix": "v1"}}})
    )
    names = ("SAMPLE_SETTING", "SAMPLE_ROUTE")
    saved = {n: os.environ.get(n) for n in names}
    runner = Runner(
        app_dir,
        {"SAMPLE_SETTING": "explicit", "SAMPLE_ROUTE": "in-process"},
        script="sample_in_process_app.py",
    )
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def test_library_runner_honours_route_prefix_and_explicit_settings(
    in_process_runner: Runner,
) -> None:
    assert in_process_runner.url.endswith("/v1")
    assert in_process_runner.port > 0
    assert call(f"{in_process_runner.url}/setting").body == b"explicit"
    assert call(f"{in_process_runner.url}/in-process").body == b"from setting route"
    assert call(f"http://127.0.0.1:{in_process_runner.port}/api/setting").status == 404


def test_retry_policy_is_read_from_the_function_settings(tmp_path: Path) -> None:
    (tmp_path / "retry_app.py").write_text(
        "import azure.functions as func\n"
        "app = func.FunctionApp()\n"
        "@app.retry(strategy='exponential_backoff', max_retry_count='-1',\n"
        "           minimum_interval='00:00:01', maximum_interval='00:01:00')\n"
        "@app.cosmos_db_trigger(arg_name='docs', connection='C', database_name='d',\n"
        "                       container_name='c', lease_container_name='l')\n"
        "def relay(docs: func.DocumentList) -> None:\n"
        "    pass\n"
        "@app.cosmos_db_trigger(arg_name='docs', connection='C', database_name='d',\n"
        "                       container_name='c2', lease_container_name='l')\n"
        "def no_retry(docs: func.DocumentList) -> None:\n"
        "    pass\n"
    )

    async def index() -> list[object]:
        env = {**os.environ, "PYTHON_SCRIPT_FILE_NAME": "retry_app.py"}
        worker = LanguageWorker(tmp_path, env)
        try:
            return await worker.start()
        finally:
            await worker.stop()

    metadata = asyncio.run(index())
    specs = {s.name: s for s in specs_from_metadata(metadata, HostJson())}
    policy = specs["relay"].retry
    assert policy == RetryPolicy("exponential_backoff", -1, 0.0, 1.0, 60.0)
    assert specs["no_retry"].retry is None
    assert specs["relay"].trigger["leaseContainerName"] == "l"


def test_exponential_backoff_is_the_hosts_randomized_strategy() -> None:
    policy = RetryPolicy.from_mapping(
        {"strategy": "exponentialBackoff", "maxRetryCount": 3,
         "minimumInterval": "00:00:01", "maximumInterval": "00:00:10"}
    )  # fmt: skip
    for seed in range(50):
        backoff = policy.backoff(random.Random(seed))
        delays = [backoff.next_delay() for _ in range(8)]
        assert delays[0] == 1.0  # the first retry waits the minimum
        # then minimum + r * 2^(k-1) * minimum, r in [0.8, 1.2], until the maximum holds
        for k, delay in enumerate(delays[1:4], start=1):
            assert 1.0 + 0.8 * 2 ** (k - 1) <= delay <= 1.0 + 1.2 * 2 ** (k - 1)
        assert delays[-2:] == [10.0, 10.0]
        assert delays == sorted(delays)
    jittered = {policy.backoff(random.Random(seed)).next_delay() for seed in range(5)}
    second = set()
    for seed in range(20):
        backoff = policy.backoff(random.Random(seed))
        backoff.next_delay()
        second.add(backoff.next_delay())
    assert jittered == {1.0} and len(second) > 10  # jitter from the second retry on
    assert policy.allows(2) and not policy.allows(3)


def test_fixed_delay_and_timespans() -> None:
    fixed = RetryPolicy.from_mapping(
        {"strategy": "fixed_delay", "max_retry_count": "-1", "delay_interval": "00:00:00.25"}
    )
    assert fixed.backoff().next_delay() == 0.25
    assert fixed.allows(10_000)
    assert parse_timespan("1.00:00:01") == 86401.0


@pytest.mark.parametrize(
    ("template", "path", "expected"),
    [
        ("contacts/{id}", "contacts/abc", {"id": "abc"}),
        ("contacts/{id}", "CONTACTS/abc", {"id": "abc"}),
        ("contacts/{id}", "contacts/abc/x", None),
        ("contacts/{id:guid}", "contacts/3f2504e0-4f89-11d3-9a0c-0305e82c3301",
         {"id": "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}),
        ("contacts/{id:guid}", "contacts/nope", None),
        ("n/{x:int}", "n/-12", {"x": "-12"}),
        ("n/{x:int:min(5)}", "n/3", None),
        ("n/{x:alpha:maxlength(3)}", "n/abcd", None),
        ("files/{*rest}", "files/a/b", {"rest": "a/b"}),
        ("opt/{v?}", "opt", {}),
        ("opt/{v?}", "opt/1", {"v": "1"}),
        ("r/{code:regex(^[a-z]+$)}", "r/ab", {"code": "ab"}),
        ("r/{code:regex(^[a-z]+$)}", "r/a1", None),
        ("openapi.json", "openapi.json", {}),
    ],
)  # fmt: skip
def test_route_templates(template: str, path: str, expected: dict[str, str] | None) -> None:
    assert compile_route(template).match(path) == expected


def test_route_table_takes_the_first_route_that_matches_path_and_method() -> None:
    # As the host's RouteCollection: in the order added (the host adds them by function name),
    # no precedence between templates; a wrong method is no match.
    table: RouteTable[str] = RouteTable()
    table.add("contacts/{id}", frozenset({"GET"}), "get")
    table.add("contacts/{id}", frozenset({"PATCH"}), "patch")
    table.add("contacts/search", frozenset({"GET", "POST"}), "search")
    table.add("contacts", None, "any")
    assert table.resolve("contacts/search", "GET") == ("get", {"id": "search"})
    assert table.resolve("contacts/search", "POST") == ("search", {})
    assert table.resolve("contacts/42", "PATCH") == ("patch", {"id": "42"})
    assert table.resolve("contacts/42", "DELETE") is None
    assert table.resolve("contacts", "DELETE") == ("any", {})
    assert table.resolve("other", "GET") is None


@pytest.mark.parametrize(
    ("template", "refused"),
    [
        ("api//{*route}", True),  # AsgiFunctionApp's "/{*route}" under the default prefix
        ("/{*route}", False),  # ... under routePrefix "": one leading slash is trimmed
        ("api//hello", True),
        ("api/a//b", True),
        ("~/x", False),
        ("api/x/", False),
    ],
)  # fmt: skip
def test_route_templates_asp_net_core_refuses_stop_the_start(template: str, refused: bool) -> None:
    if refused:
        with pytest.raises(RouteTemplateError, match="cannot appear consecutively"):
            check_route_template("f", template)
    else:
        check_route_template("f", template)
