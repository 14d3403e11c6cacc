"""The bindings' pure parts, in process (no server): what the host's script types make of a
value (``_bindings/values.py``), binding expressions and binding data
(``_bindings/expressions.py``), the HTTP output's choice (``_bindings/http.py``), the
connections' settings (``_connections.py``), and the plan: what is served, what is refused at
indexing and why (``_bindings/plan.py``)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from funcstack.deadlines import SHORT
from funcstack.functions_host._bindings.expressions import (
    BindingData,
    ExpressionError,
    Template,
    binding_data,
)
from funcstack.functions_host._bindings.http import http_output_name, response_value
from funcstack.functions_host._bindings.plan import AppRefusedError, plan_bindings
from funcstack.functions_host._bindings.values import (
    BindingValueError,
    Json,
    collector_bytes,
    collector_jobject,
    collector_string,
    dotnet_double,
    from_typed_data,
    newtonsoft_text,
    stream_bytes,
)
from funcstack.functions_host._blob_trigger import BlobPattern, BlobTriggerOptions, quoted_etag
from funcstack.functions_host._config import HostJson, SettingError, host_id
from funcstack.functions_host._connections import (
    blob_service_for,
    connection_problem,
    cosmos_client_for,
    queue_service_for,
)
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._queue_trigger import _enqueued, notify_enqueued
from funcstack.functions_host._rpc import protos

SERVED = {"httpTrigger", "queueTrigger", "blobTrigger", "serviceBusTrigger", "timerTrigger"}
STORAGE = "UseDevelopmentStorage=true"


def spec(name: str, *bindings: dict[str, Any]) -> FunctionSpec:
    trigger = next(b for b in bindings if str(b["type"]).endswith("Trigger"))
    return FunctionSpec(name, f"id-{name}", trigger, tuple(bindings), None)


HTTP = {"type": "httpTrigger", "direction": "in", "name": "req"}
HTTP_OUT = {"type": "http", "direction": "out", "name": "$return"}


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AzureWebJobsStorage", STORAGE)
    monkeypatch.setenv("CosmosConn", "AccountEndpoint=https://127.0.0.1:1/;AccountKey=a2V5;")
    monkeypatch.setenv(
        "BusConn", "Endpoint=sb://127.0.0.1/;SharedAccessKeyName=k;SharedAccessKey=a"
    )


# -- values: what the host writes --------------------------------------------------------


def test_a_json_object_is_written_to_a_queue_as_newtonsofts_indented_text() -> None:
    value = Json({"id": None, "body": "hello", "n": [1, 2.0], "empty": {}})
    assert collector_bytes(value) == [
        b'{\n  "id": null,\n  "body": "hello",\n  "n": [\n    1,\n    2.0\n  ],\n  "empty": {}\n}'
    ]


def test_a_list_or_a_string_that_is_a_json_array_is_one_message_per_element() -> None:
    assert collector_string(Json(["one", "two"])) == ["one", "two"]
    # Azure/azure-functions-python-worker#1492: a str that looks like a JSON array is split
    assert collector_bytes("[1, true, null]") == [b"1", b"True", b""]
    assert collector_string("not [json]") == ["not [json]"]


def test_a_string_that_looks_like_json_but_is_not_fails_the_write() -> None:
    with pytest.raises(BindingValueError, match="is not JSON"):
        collector_string("{not json}")


def test_dates_in_a_json_string_are_reformatted_as_newtonsoft_reads_them() -> None:
    assert collector_string('{"at": "2019-01-01T00:00:01.0000000Z"}') == [
        '{\n  "at": "2019-01-01T00:00:01Z"\n}'
    ]


def test_bytes_on_a_string_collector_are_dotnets_type_name() -> None:
    assert collector_string(b"\x01") == ["System.Byte[]"]
    assert collector_bytes(b"\x01\x02") == [b"\x01\x02"]


def test_cosmos_items_must_be_json_objects() -> None:
    assert collector_jobject(Json([{"id": "a"}, {"id": "b"}])) == [{"id": "a"}, {"id": "b"}]
    assert collector_jobject('{"id": "c"}') == [{"id": "c"}]
    with pytest.raises(BindingValueError, match="Parameter 'item'"):
        collector_jobject("plain text")


def test_a_stream_gets_compact_json_utf8_text_and_dotnets_number_bytes() -> None:
    assert stream_bytes(Json({"a": [1, "é"]})) == '{"a":[1,"é"]}'.encode()
    assert stream_bytes("dată") == "dată".encode()
    assert stream_bytes(7) == b"\x07\x00\x00\x00"  # BitConverter.GetBytes((int)long)
    assert stream_bytes(2**32 + 1) == b"\x01\x00\x00\x00"  # unchecked: truncated
    assert stream_bytes(1.0) == b"\x00\x00\x00\x00\x00\x00\xf0\x3f"


@pytest.mark.parametrize(
    ("value", "literal", "text"),
    [
        (1.0, "1.0", "1"),
        (1e15, "1E+15", "1E+15"),
        (1e14, "100000000000000.0", "100000000000000"),
        (1e-5, "1E-05", "1E-05"),
        (0.0001, "0.0001", "0.0001"),
        (-2.5e-7, "-2.5E-07", "-2.5E-07"),
    ],
)
def test_doubles_as_dotnet_writes_them(value: float, literal: str, text: str) -> None:
    assert dotnet_double(value, json_literal=True) == literal
    assert dotnet_double(value, json_literal=False) == text


def test_newtonsoft_escapes_the_line_separators_and_keeps_other_text() -> None:
    assert newtonsoft_text("a\u2028é\n", indented=False) == '"a\\u2028é\\n"'


def test_typed_data_becomes_the_hosts_object() -> None:
    pb = protos()
    assert from_typed_data(pb.TypedData(string="s")) == "s"
    assert from_typed_data(pb.TypedData(bytes=b"b")) == b"b"
    assert from_typed_data(pb.TypedData(json='{"a": 1}')) == Json({"a": 1})
    assert from_typed_data(pb.TypedData()) is None


# -- expressions and binding data --------------------------------------------------------


def test_templates_resolve_names_ignoring_case_and_dotted_paths() -> None:
    data = BindingData({"Id": "7", "Query": {"Name": "x"}, "n": 3}, "fn")
    assert Template.parse("a/{id}/{query.name}-{N}.txt").bind(data) == "a/7/x-3.txt"
    assert Template.parse("{{literal}}/{sys.methodname}").bind(data) == "{literal}/fn"
    with pytest.raises(ExpressionError, match="No value for named parameter 'missing'"):
        Template.parse("{missing}").bind(data)
    assert len(Template.parse("{rand-guid:N}").bind(data)) == 32
    assert len(Template.parse("{datetime:yyyy}").bind(data)) == 4


def test_a_sql_query_gets_parameters_never_text() -> None:
    data = BindingData({"category": "x' OR 1=1 --"}, "fn")
    query, parameters = Template.parse("SELECT * FROM c WHERE c.k = {category}").bind_sql(data)
    assert query == "SELECT * FROM c WHERE c.k = @category"
    assert parameters == [{"name": "@category", "value": "x' OR 1=1 --"}]


def test_http_binding_data_is_body_then_query_then_route() -> None:
    pb = protos()
    http = pb.RpcHttp(
        method="POST",
        query={"id": "from-query", "code": "key", "q": "1"},
        params={"id": "from-route"},
        headers={"x-h": "v"},
    )
    http.body.CopyFrom(pb.TypedData(bytes=b'{"id": "from-body", "b": true, "arr": [1]}'))
    data = binding_data("fn", "httpTrigger", pb.TypedData(http=http), {})
    assert data.lookup("id") == "from-route"
    assert data.lookup("b") == "True"  # (string)JValue
    assert data.lookup("Query.q") == "1"
    assert data.lookup("headers.X-H") == "v"
    for absent in ("arr", "code"):
        with pytest.raises(ExpressionError):
            data.lookup(absent)


def test_other_triggers_bind_their_metadata_and_json_properties() -> None:
    pb = protos()
    data = binding_data(
        "fn",
        "queueTrigger",
        pb.TypedData(string='{"orderId": 42}'),
        {"DequeueCount": pb.TypedData(json="1"), "Id": pb.TypedData(string="m1")},
    )
    assert (data.lookup("orderId"), data.lookup("dequeuecount"), data.lookup("id")) == (
        "42",
        1,
        "m1",
    )


# -- the HTTP output ---------------------------------------------------------------------


def test_the_http_output_is_the_return_value_or_the_named_output() -> None:
    pb = protos()
    answer = pb.InvocationResponse(
        return_value=pb.TypedData(string="to the queue"),
        output_data=[pb.ParameterBinding(name="resp", data=pb.TypedData(http=pb.RpcHttp()))],
    )
    named = [HTTP, {"type": "http", "direction": "out", "name": "resp"}]
    assert http_output_name(named) == "resp"
    named_value, returned = response_value("resp", answer), response_value("$return", answer)
    assert named_value is not None and named_value.WhichOneof("data") == "http"
    assert returned is not None and returned.string == "to the queue"
    assert response_value(None, answer) is None  # no HTTP output: OkResult
    unset = pb.InvocationResponse(return_value=pb.TypedData(string="x"))
    assert response_value("resp", unset) is None


def test_a_message_the_host_adds_wakes_the_queues_listener_at_once() -> None:
    """``SharedQueueWatcher``: the queue output notifies; the listener's back-off ends. Woken
    (True), not run out (False, after its 30 s), whatever the machine's speed; how long the
    wake took is printed."""

    async def scenario() -> tuple[bool, bool, float]:
        other = asyncio.create_task(_enqueued("other", 0.2))
        waiting = asyncio.create_task(_enqueued("jobs", 30.0))
        await asyncio.sleep(0.01)
        started = time.monotonic()
        notify_enqueued("Jobs")  # queue names are lower-cased, as the extension does
        woken = await asyncio.wait_for(waiting, 30.0 + SHORT)
        return woken, await other, time.monotonic() - started

    woken, other_woken, waited = asyncio.run(scenario())
    assert (woken, other_woken) == (True, False)
    print(f"woken {waited * 1000:.1f} ms after the notification")


# -- connections -------------------------------------------------------------------------


def test_identity_based_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("Ident__blobServiceUri", "https://acct.blob.core.windows.net")
    monkeypatch.setenv("Ident__queueServiceUri", "https://acct.queue.core.windows.net")
    monkeypatch.setenv("Alias__serviceUri", "https://other.blob.core.windows.net")
    monkeypatch.setenv("AzureWebJobsPrefixed__accountName", "third")
    monkeypatch.setenv("Cosmos__accountEndpoint", "https://acct.documents.azure.com:443/")
    assert blob_service_for("Ident").url.startswith("https://acct.blob.core.windows.net")
    assert queue_service_for("Ident").url.startswith("https://acct.queue.core.windows.net")
    assert blob_service_for("Alias").url.startswith("https://other.blob.core.windows.net")
    assert blob_service_for("Prefixed").url.startswith("https://third.blob.core.windows.net")
    assert cosmos_client_for("Cosmos").client_connection.url_connection.startswith(
        "https://acct.documents.azure.com"
    )
    assert connection_problem("servicebus", "Nothing") == (
        "app setting Nothing (or Nothing__fullyQualifiedNamespace) is not set"
    )
    monkeypatch.setenv("Bus__fullyQualifiedNamespace", "ns.servicebus.windows.net")
    assert connection_problem("servicebus", "Bus") is None


# -- the plan: served, or refused at indexing --------------------------------------------


def plan(*specs: FunctionSpec) -> Any:
    return plan_bindings(specs, HostJson(), SERVED)


def refusals(*specs: FunctionSpec) -> list[str]:
    with pytest.raises(AppRefusedError) as caught:
        plan(*specs)
    return caught.value.refusals


@pytest.mark.usefixtures("settings")
def test_served_bindings_are_planned() -> None:
    plan(
        spec(
            "f",
            HTTP,
            HTTP_OUT,
            {"type": "blob", "direction": "in", "name": "a", "path": "box/{id}"},
            {"type": "blob", "direction": "out", "name": "b", "path": "box/x"},
            {"type": "queue", "direction": "out", "name": "q", "queueName": "Jobs"},
            {"type": "cosmosDB", "direction": "in", "name": "d", "connection": "CosmosConn",
             "databaseName": "db", "containerName": "c", "sqlQuery": "SELECT * FROM c"},
            {"type": "serviceBus", "direction": "out", "name": "s", "connection": "BusConn",
             "topicName": "t"},
        )
    )  # fmt: skip


@pytest.mark.usefixtures("settings")
def test_the_bindings_clients_are_made_when_the_host_starts_not_at_the_first_write() -> None:
    """The host makes its bindings' clients (their SDKs imported in a thread) before it is
    ready: the first blob write of a new host took 0.3-1.6 s, importing azure.storage.blob.aio;
    a client whose setting is missing is left to the binding, which fails its invocation."""
    planned = plan(
        spec(
            "f",
            HTTP,
            {"type": "blob", "direction": "out", "name": "b", "path": "box/x"},
            {"type": "queue", "direction": "out", "name": "q", "queueName": "jobs"},
            {"type": "serviceBus", "direction": "out", "name": "s", "connection": "BusConn",
             "queueName": "q"},
        )
    )  # fmt: skip
    clients = planned._clients
    assert clients._made == {}
    asyncio.run(planned.open())
    assert set(clients._made) == {
        ("blobs", "AzureWebJobsStorage"),
        ("queues", "AzureWebJobsStorage"),
        ("servicebus", "BusConn"),
    }
    asyncio.run(planned.close())


@pytest.mark.usefixtures("settings")
@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        ({"type": "table", "direction": "in", "tableName": "t"}, "Azure Tables"),
        ({"type": "eventHub", "direction": "out", "eventHubName": "h"}, "Event Hubs"),
        ({"type": "sql", "direction": "out"}, "Azure SQL"),
        ({"type": "durableClient", "direction": "in"}, "Durable Functions"),
        ({"type": "somethingNew", "direction": "out"}, "serves no 'somethingNew' binding"),
        ({"type": "queue", "direction": "in", "queueName": "q"}, "QueueClient"),
        ({"type": "serviceBus", "direction": "in", "queueName": "q"}, "no input binding"),
        ({"type": "blob", "direction": "in", "path": "container"}, "names a container only"),
        ({"type": "blob", "direction": "out", "path": "box/b", "dataType": "stream"}, "stream"),
        ({"type": "queue", "direction": "out", "queueName": "Bad--Name"}, "single dashes"),
        ({"type": "queue", "direction": "out", "queueName": "q", "connection": "Nope"},
         "app setting Nope (or Nope__queueServiceUri) is not set"),
        ({"type": "serviceBus", "direction": "out", "connection": "BusConn"},
         "either 'queueName' or 'topicName'"),
        ({"type": "cosmosDB", "direction": "in", "connection": "CosmosConn",
          "databaseName": "d", "collectionName": "c"}, "3.x"),
        ({"type": "cosmosDB", "direction": "in", "connection": "CosmosConn", "databaseName": "d",
          "containerName": "c", "id": "1", "sqlQuery": "SELECT 1"}, "not both"),
        ({"type": "blob", "direction": "in", "path": "box/{broken"}, "without"),
        ({"type": "blob", "direction": "out", "path": "Bad_Name/b"}, "container name"),
        ({"type": "blob", "direction": "in", "path": "%NOT_SET%/b"}, "NOT_SET"),
        ({"type": "blob", "direction": "in", "path": "box/b",
          "properties": {"SupportsDeferredBinding": True}}, "SDK-type"),
        ({"type": "http", "direction": "in"}, "only be used for output"),
    ],
)  # fmt: skip
def test_a_binding_funcstack_cannot_honour_is_refused_naming_it(
    binding: dict[str, Any], reason: str
) -> None:
    found = refusals(spec("fn", HTTP, HTTP_OUT, {"name": "bad", **binding}))
    assert len(found) == 1
    assert found[0].startswith(f"function 'fn', binding 'bad' ({binding['type']}, ")
    assert reason in found[0]


@pytest.mark.usefixtures("settings")
def test_triggers_funcstack_does_not_serve_are_refused() -> None:
    found = refusals(
        spec("hub", {"type": "eventHubTrigger", "direction": "in", "name": "e"}),
        spec("grid", {"type": "blobTrigger", "direction": "in", "name": "b", "path": "c/{n}",
                      "source": "EventGrid"}),
        spec("batch", {"type": "serviceBusTrigger", "direction": "in", "name": "m",
                       "queueName": "q", "cardinality": "many"}),
        spec("timer", {"type": "timerTrigger", "direction": "in", "name": "t"},
             {"type": "http", "direction": "out", "name": "$return"}),
        spec("two", HTTP, HTTP_OUT, {"type": "http", "direction": "out", "name": "other"}),
    )  # fmt: skip
    assert [line.split(":", 1)[0] for line in found] == [
        "function 'hub', binding 'e' (eventHubTrigger, in)",
        "function 'grid', binding 'b' (blobTrigger, in)",
        "function 'batch', binding 'm' (serviceBusTrigger, in)",
        "function 'timer', binding 't' (timerTrigger, in)",
        "function 'two', binding 'other' (http, out)",
    ]
    assert "Event Grid" in found[1]
    assert "cardinality many" in found[2]
    assert "httpTrigger" in found[3]


def test_the_error_names_every_refusal_on_one_line() -> None:
    error = AppRefusedError(["function 'a', binding 'x' (t, in): r1", "function 'b', ...: r2"])
    assert "\n" not in str(error)
    assert str(error).endswith("r1; function 'b', ...: r2")


# -- the blob trigger's pure parts -------------------------------------------------------


def test_a_blob_pattern_captures_greedily_across_slashes() -> None:
    pattern = BlobPattern("{name}.{ext}")
    assert pattern.match("dir/a.b.txt") == {"name": "dir/a.b", "ext": "txt"}
    assert BlobPattern("in-{id}.json").match("in-7.json") == {"id": "7"}
    assert BlobPattern("in-{id}.json").match("out-7.json") is None
    assert BlobPattern("{{x}}-{n}").match("{x}-1") == {"n": "1"}


def test_blob_trigger_options() -> None:
    opts = BlobTriggerOptions.from_binding(
        {"path": "samples/{name}", "connection": "S", "dataType": "BINARY"},
        {"PoisonBlobThreshold": 2},
    )
    assert (opts.container, opts.pattern, opts.data_type, opts.poison_threshold) == (
        "samples",
        "{name}",
        "binary",
        2,
    )
    for bad in ({"path": "samples"}, {"path": "{c}/x"}, {"path": "c/x", "source": "EventGrid"}):
        with pytest.raises(SettingError):
            BlobTriggerOptions.from_binding(bad)
    assert quoted_etag("0x8D") == quoted_etag('"0x8D"') == '"0x8D"'


def test_the_host_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    app = tmp_path / "My_App.Folder"
    app.mkdir()
    monkeypatch.delenv("AzureFunctionsWebHost__hostid", raising=False)
    assert host_id(app) == "my-app-folder"
    assert host_id(app, "function:a") != host_id(app, "function:b")
    monkeypatch.setenv("AzureFunctionsWebHost__hostid", "Given")
    assert host_id(app, "function:a") == "given"
