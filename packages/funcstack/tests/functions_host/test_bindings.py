"""Input and output bindings end to end, against the local Cosmos DB endpoint, Service Bus
endpoint and Azurite, through the real worker library and the unmodified SDKs: the behaviours
that azure-functions-python-worker's end-to-end tests of its v2 "stein" apps check
(``tests/endtoend/test_{blob,queue,servicebus,cosmosdb,http}_functions.py``), each with its
check named in the test's docstring, in an app of our own (``sample_bindings_app.py``); and the
refusal of an app whose bindings funcstack cannot honour. One stack for the module."""

from __future__ import annotations

import base64
import contextlib
import email.message
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from azure.cosmos import CosmosClient, PartitionKey
from azure.servicebus import ServiceBusClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient
from servicebus.conftest import Target, entities

import funcstack.deadlines as deadlines
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import SHORT
from funcstack.functions_host._launcher import RunnerStartError, RunningRunner, start_runner
from funcstack.functions_host.testing import call
from funcstack.services import Azurite

from .conftest import make_app_dir

pytestmark = pytest.mark.integration

BLOBS = "bindings"
PREFIX = "bq"
SB_QUEUE = "bindings-q"
SB_TOPIC = "bindings-t"
DATABASE = f"shop-{uuid.uuid4().hex[:8]}"  # on the run's endpoint
MAX_DEQUEUE = 2


@dataclass
class Answer:
    status_code: int
    content: bytes
    headers: dict[str, str]

    @property
    def text(self) -> str:
        """The body as Microsoft's checks read it (``requests``' ``Response.text``): in the
        charset of its ``Content-Type``, else ISO-8859-1 for ``text/*`` (RFC 2616), else
        UTF-8."""
        found = email.message.Message()
        found["content-type"] = self.headers.get("content-type", "")
        charset = found.get_content_charset()
        if charset is None:
            charset = "iso-8859-1" if found.get_content_maintype() == "text" else "utf-8"
        return self.content.decode(charset)

    def json(self) -> Any:
        return json.loads(self.content)


@dataclass
class Http:
    """The app's routes, by path under its URL."""

    base: str

    def _call(self, method: str, path: str, body: bytes | None, params: dict[str, str]) -> Answer:
        url = f"{self.base}/{quote(path)}" + (f"?{urlencode(params)}" if params else "")
        reply = call(url, method, body)
        return Answer(reply.status, reply.body, reply.headers)

    def get(self, path: str, params: dict[str, str] | None = None) -> Answer:
        return self._call("GET", path, None, params or {})

    def post(self, path: str, content: bytes | str = b"") -> Answer:
        body = content.encode("utf-8") if isinstance(content, str) else content
        return self._call("POST", path, body, {})


@dataclass
class Stack:
    runner: RunningRunner
    log: Path
    storage: str
    cosmos: CosmosClient
    bus: str
    http: Http

    def blob(self, name: str, container: str = BLOBS) -> bytes | None:
        client = BlobServiceClient.from_connection_string(self.storage)
        blob = client.get_blob_client(container, name)
        return blob.download_blob().readall() if blob.exists() else None

    def peek(self, queue: str) -> list[str]:
        client = QueueServiceClient.from_connection_string(self.storage).get_queue_client(queue)
        try:
            messages = client.peek_messages(max_messages=32)
        except Exception:
            return []
        return [base64.b64decode(m.content).decode("utf-8") for m in messages]


def wait_for[T](probe: Callable[[], T | None], what: str, deadline: float = SHORT) -> T:
    """`funcstack.deadlines.wait_for`, looking at the storage five times a second."""
    return deadlines.wait_for(probe, what, deadline, every=0.2)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: Target,
    shared_azurite: Azurite,
) -> Iterator[Stack]:
    """The run's Cosmos DB and Service Bus endpoints and Azurite (this module's
    database, queue, topic, blob container and queues on them), the bindings app's host."""
    tmp = tmp_path_factory.mktemp("bindings")
    namespace = {
        "Queues": [{"Name": SB_QUEUE, "Properties": {}}],
        "Topics": [
            {"Name": SB_TOPIC, "Properties": {}, "Subscriptions": [{"Name": "all"}]},
        ],
    }
    cosmos = shared_cosmos  # its database is this module's own
    azurite = shared_azurite  # the blob container and queues are this module's own names
    bus = shared_servicebus.endpoint
    assert bus is not None
    runner: RunningRunner | None = None
    made = contextlib.ExitStack()
    try:
        made.enter_context(entities(bus, namespace))
        client = CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options())
        database = client.create_database_if_not_exists(DATABASE)
        database.create_container("nopk", PartitionKey("/pk"))
        BlobServiceClient.from_connection_string(azurite.connection_string).create_container(BLOBS)
        app_dir = make_app_dir(
            tmp,
            "sample_bindings_app.py",
            {
                "FUNCTIONS_WORKER_RUNTIME": "python",
                "AzureWebJobsStorage": azurite.connection_string,
                "CosmosConn": f"AccountEndpoint={cosmos.endpoint};AccountKey={cosmos.key};",
                "ServiceBusConn": bus.connection_string,
                "BLOBS": BLOBS,
                "QUEUE_PREFIX": PREFIX,
                "SB_QUEUE": SB_QUEUE,
                "SB_TOPIC": SB_TOPIC,
                "DATABASE": DATABASE,
            },
        )
        (app_dir / "host.json").write_text(
            json.dumps(
                {"version": "2.0", "extensions": {"queues": {"maxDequeueCount": MAX_DEQUEUE}}}
            )
        )
        runner = start_runner(
            app_dir=app_dir,
            settings_file=app_dir / "local.settings.json",
            log_path=tmp / "runner.log",
        )
        yield Stack(
            runner,
            tmp / "runner.log",
            azurite.connection_string,
            client,
            bus.connection_string,
            Http(runner.url),
        )
    finally:
        if runner is not None:
            runner.stop()
        made.close()
        with CosmosClient(cosmos.endpoint, cosmos.key, **cosmos.client_options()) as client:
            client.delete_database(DATABASE)


# -- blob (test_blob_functions.py) ---------------------------------------------------------


def test_blob_outputs_and_inputs_as_str_bytes_and_stream(stack: Stack) -> None:
    """test_blob_io_str, test_blob_io_bytes, test_blob_io_filelike, and the large variants
    (4 MB here, 27 MB there: the same path, less CPU)."""
    http = stack.http
    for payload in ("test-data", "DummyData" * (4 * 1024 * 1024 // 9)):
        assert (http.post("blob/str", content=payload).status_code, stack.blob("str.txt")) == (
            200,
            payload.encode(),
        )
        assert http.get("blob/str").text == payload  # the input as str (dataType STRING)
        assert http.get("blob/read/str.txt").text == payload  # as func.InputStream
    data = "test-dată".encode()
    assert http.post("blob/bytes", content=data).text == "OK"
    got = http.get("blob/bytes").json()  # the input as bytes (dataType BINARY)
    assert got == {"size": len(data), "md5": hashlib.md5(data).hexdigest()}  # noqa: S324
    # ... decoded by the function and returned as a str: read back as the client reads it, in
    # the charset the host names (text/plain; charset=utf-8), it is the text sent
    assert http.get("blob/bytes/text").text == "test-dată"
    assert http.post("blob/filelike").text == "OK"
    assert http.get("blob/read/filelike.txt").text == "filelike"


def test_a_return_to_a_blob_beside_an_http_trigger(stack: Stack) -> None:
    """test_blob_io_return: ``$return`` goes to the blob, the caller gets the host's 200 with
    no body (the named HTTP output was not set; the generic app has none at all)."""
    for route, blob, text in (
        ("blob/return", "return.txt", "FROM RETURN"),
        ("blob/generic", "generic.txt", "GENERIC RETURN"),
    ):
        reply = stack.http.post(route)
        assert (reply.status_code, reply.content, "content-type" in reply.headers) == (
            200,
            b"",
            False,
        )
        assert stack.blob(blob) == text.encode()


def test_a_missing_blob_is_none_and_a_path_takes_route_values(stack: Stack) -> None:
    """The input's ``path`` with ``{name}`` from the route; a blob that does not exist arrives
    as None."""
    assert stack.http.get("blob/read/no-such-blob").status_code == 404


def test_several_blob_inputs_and_outputs_in_one_function(stack: Stack) -> None:
    """test_blob_functions' put_get_multiple_blobs_as_bytes_return_http_response."""
    blobs = BlobServiceClient.from_connection_string(stack.storage).get_container_client(BLOBS)
    in1, in2 = b"\x00\x01first", b"\xffsecond"
    blobs.upload_blob("in-1.bin", in1, overwrite=True)
    blobs.upload_blob("in-2.bin", in2, overwrite=True)
    reply = stack.http.post("blob/multiple")
    assert reply.json() == {
        "in1": hashlib.md5(in1).hexdigest(),  # noqa: S324
        "in2": hashlib.md5(in2).hexdigest(),  # noqa: S324
    }
    assert (stack.blob("out-1.bin"), stack.blob("out-2.bin")) == (in1[::-1], in2 + in1)


def test_the_blob_trigger_hands_its_blob_and_name_to_a_blob_output(stack: Stack) -> None:
    """test_blob_trigger: the triggered function gets the blob's name, length and content; its
    ``$return`` goes to a blob named with the trigger's ``{name}``."""
    blobs = BlobServiceClient.from_connection_string(stack.storage)
    container = blobs.get_container_client(f"{BLOBS}-in")
    if not container.exists():
        container.create_container()
    container.upload_blob("sample.txt", b"DummyData", overwrite=True)
    found = wait_for(lambda: stack.blob("triggered-sample.json"), "the blob trigger")
    assert json.loads(found) == {
        "name": f"{BLOBS}-in/sample.txt",
        "length": 9,
        "content": "DummyData",
    }


# -- Storage queue (test_queue_functions.py) -----------------------------------------------


def test_a_queue_output_feeds_a_queue_trigger(stack: Stack) -> None:
    """test_queue_basic: the message's body and its id, times, pop receipt and dequeue count."""
    assert stack.http.post("queue/put", content=b"test-message").text == "OK"
    seen = json.loads(wait_for(lambda: stack.blob("queue-basic.json"), "the queue trigger"))
    assert seen["body"] == "test-message"
    for key in ("id", "expiration_time", "insertion_time", "time_next_visible", "pop_receipt"):
        assert seen[key], key
    assert seen["dequeue_count"] == 1


def test_a_queue_return_beside_an_http_trigger_goes_to_the_queue(stack: Stack) -> None:
    """test_queue_return: the ``$return`` is the message (never the HTTP answer)."""
    reply = stack.http.post("queue/return", content=b"test-message-return")
    assert (reply.status_code, reply.content) == (200, b"")
    found = wait_for(lambda: stack.blob("queue-return.txt"), "the queue trigger")
    assert found == b"test-message-return"


def test_a_queue_message_object_is_written_as_the_hosts_json_of_it(stack: Stack) -> None:
    """test_queue_message_object_return / test_queue_untyped_return return a
    ``func.QueueMessage``: the worker sends it as ``{"id": ..., "body": ...}`` and the host's
    ``IAsyncCollector<byte[]>`` writes that JSON text, indented (so those two checks, which
    expect the body alone, do not hold: docs/azure-differences.md)."""
    reply = stack.http.post("queue/message", content=b"test-message-object-return")
    assert (reply.status_code, reply.content) == (200, b"")
    queued = wait_for(lambda: stack.peek(f"{PREFIX}-message"), "the message")
    assert queued == ['{\n  "id": null,\n  "body": "test-message-object-return"\n}']


def test_a_named_http_output_answers_beside_a_queue_output(stack: Stack) -> None:
    """test_queue_return_multiple_outparam: ``resp.set(func.HttpResponse(...))`` with the
    route's ``binding_arg_name`` is the answer; the queue output is written too."""
    reply = stack.http.post("queue/both", content=b"foo")
    assert (reply.status_code, reply.text) == (201, "HTTP response: foo")
    queued = wait_for(lambda: stack.peek(f"{PREFIX}-both"), "the message")
    assert json.loads(queued[0]) == {"id": None, "body": "foo"}


def test_a_list_is_one_message_per_item(stack: Stack) -> None:
    """test_queue_return_multiple (which checks a 2xx only): ``msgs.set(['one', 'two'])``."""
    assert stack.http.post("queue/many", content=b"x").status_code == 200
    assert sorted(wait_for(lambda: stack.peek(f"{PREFIX}-many"), "the messages")) == [
        "one",
        "two",
    ]


def test_an_output_that_fails_fails_the_invocation_and_the_trigger_retries_it(
    stack: Stack,
) -> None:
    """Never a silent success: a blob output the storage refuses (the blob the message names
    is leased by someone else: 412) fails the invocation; the queue trigger retries it as any
    failure, then moves the message to the poison queue."""
    blobs = BlobServiceClient.from_connection_string(stack.storage).get_container_client(BLOBS)
    blobs.upload_blob("leased.txt", b"kept", overwrite=True).acquire_lease(lease_duration=-1)
    queue = QueueServiceClient.from_connection_string(stack.storage).get_queue_client(
        f"{PREFIX}-badout"
    )
    queue.create_queue()
    queue.send_message(base64.b64encode(b"leased.txt").decode())
    poisoned = wait_for(lambda: stack.peek(f"{PREFIX}-badout-poison"), "the poison queue")
    assert poisoned == ["leased.txt"]
    failures = [
        line
        for line in stack.log.read_text("utf-8").splitlines()
        if "Executed 'Functions.on_queue_to_blob' (Failed" in line
    ]
    assert len(failures) == MAX_DEQUEUE
    assert "output '$return' (blob): writing bindings/leased.txt" in stack.log.read_text("utf-8")
    assert stack.blob("leased.txt") == b"kept"


# -- Service Bus (test_servicebus_functions.py) --------------------------------------------


def test_a_service_bus_output_feeds_a_service_bus_trigger(stack: Stack) -> None:
    """test_servicebus_basic: the body arrives, with the message's properties (and the host's
    ``ContentType`` for a string, ``text/plain``)."""
    body = str(uuid.uuid4())
    assert stack.http.post("bus/queue", content=body.encode()).text == "OK"
    seen = json.loads(wait_for(lambda: stack.blob("bus.json"), "the Service Bus trigger"))
    assert (seen["body"], seen["content_type"], seen["delivery_count"]) == (body, "text/plain", 1)
    for key in ("message_id", "enqueued_time_utc", "locked_until", "lock_token"):
        assert seen[key], key
    assert seen["sequence_number"] >= 1


def test_a_service_bus_topic_output(stack: Stack) -> None:
    body = str(uuid.uuid4())
    assert stack.http.post("bus/topic", content=body.encode()).text == "OK"
    with (
        ServiceBusClient.from_connection_string(stack.bus) as client,
        client.get_subscription_receiver(SB_TOPIC, "all", max_wait_time=SHORT) as receiver,
    ):
        received = receiver.receive_messages(max_message_count=1, max_wait_time=SHORT)
        assert [str(m) for m in received] == [body]
        assert received[0].content_type == "text/plain"
        receiver.complete_message(received[0])


# -- Cosmos DB (test_cosmosdb_functions.py) ------------------------------------------------


def test_a_cosmos_output_creates_its_container_and_an_input_reads_by_id(stack: Stack) -> None:
    """test_cosmosdb_input: the document read back by id, with its system properties; the
    output's ``createIfNotExists`` made the container with its ``partitionKey`` path."""
    doc = {"id": "cosmosdb-input-test", "data": str(round(time.time())), "category": "x"}
    assert stack.http.post("cosmos/put", content=json.dumps(doc)).text == "OK"
    container = stack.cosmos.get_database_client(DATABASE).get_container_client("items")
    assert container.read()["partitionKey"]["paths"] == ["/id"]
    read = stack.http.get(f"cosmos/doc/{doc['id']}").json()
    assert (read["id"], read["data"]) == (doc["id"], doc["data"])
    for key in ("_etag", "_rid", "_self", "_ts"):
        assert key in read
    assert stack.http.get("cosmos/doc/no-such-id").status_code == 404  # None: not found


def test_a_cosmos_input_by_id_without_a_partition_key_reads_the_none_partition(
    stack: Stack,
) -> None:
    """The stein app's input gives ``id`` only: the extension reads with PartitionKey.None."""
    container = stack.cosmos.get_database_client(DATABASE).get_container_client("nopk")
    container.upsert_item({"id": "plain", "data": "no pk value"})
    assert stack.http.get("cosmos/nopk/plain").json()["data"] == "no pk value"


def test_a_cosmos_query_binds_route_and_query_values_as_parameters(stack: Stack) -> None:
    docs = [
        {"id": "q1", "category": "books", "tier": "gold"},
        {"id": "q2", "category": "books", "tier": "silver"},
        {"id": "q3", "category": "books' OR true OR c.category = 'x", "tier": "gold"},
    ]
    assert stack.http.post("cosmos/many", content=json.dumps(docs)).text == "OK"
    assert stack.http.get("cosmos/category/books", params={"tier": "gold"}).json() == ["q1"]
    injected = "books' OR true OR c.category = 'x"
    assert stack.http.get(f"cosmos/category/{injected}", params={"tier": "gold"}).json() == ["q3"]


def test_a_cosmos_output_or_input_that_fails_fails_the_invocation(stack: Stack) -> None:
    """No container and no createIfNotExists: the extension's message, a 500; an input query
    on a container that does not exist: a 500, never a missing argument."""
    assert stack.http.post("cosmos/missing", content='{"id": "x"}').status_code == 500
    assert stack.http.get("cosmos/nowhere").status_code == 500
    log = stack.log.read_text("utf-8")
    assert f"The container 'missing' (in database '{DATABASE}') does not exist" in log
    assert "Exception binding parameter 'docs'" in log


def test_the_cosmos_trigger_hands_its_documents_to_a_blob_output(stack: Stack) -> None:
    """test_cosmosdb_trigger: the document with ``_etag``, ``_lsn``, ``_rid``, ``_self``,
    ``_ts``, through a ``$return`` blob named with ``{rand-guid}``. The monitored container did
    not exist when the host started (the output creates it): the host was ready all the same,
    saying that this trigger did not listen and why, as Azure's host starts with a listener
    that could not start and retries it; it says when it listens. A lease without a checkpoint
    starts at "now", when it is first read: a document written before that is not delivered
    (as in Azure), so one is written once the trigger listens."""
    assert list(stack.runner.not_listening) == ["on_documents"]
    assert "NotFound" in stack.runner.not_listening["on_documents"]
    assert "; not listening (each keeps trying, and says when it listens): on_documents (" in (
        stack.log.read_text()
    )
    blobs = BlobServiceClient.from_connection_string(stack.storage).get_container_client(BLOBS)
    written: set[str] = set()

    def triggered() -> dict[str, Any] | None:
        for item in blobs.list_blobs(name_starts_with="cosmos-"):
            for found in json.loads(blobs.download_blob(item.name).readall()):
                if found["id"] in written:
                    return dict(found)
        return None

    def put() -> None:
        doc = {"id": f"trigger-{uuid.uuid4().hex[:6]}", "data": "d"}
        assert stack.http.post("cosmos/put", content=json.dumps(doc)).text == "OK"
        written.add(doc["id"])

    put()  # the output creates the monitored container
    wait_for(
        lambda: " on_documents: listening (it could not start" in stack.log.read_text(),
        "the Cosmos DB trigger listening once its container exists",
    )
    put()  # written after it listens: delivered
    found = wait_for(triggered, "a document written after it listens, through the trigger")
    for key in ("_etag", "_lsn", "_rid", "_self", "_ts"):
        assert key in found


# -- refused at indexing -------------------------------------------------------------------

REFUSED_APP = """
import azure.functions as func

app = func.FunctionApp()


@app.route(route="orders")
@app.table_output(arg_name="row", table_name="orders", connection="AzureWebJobsStorage")
def save_order(req: func.HttpRequest, row: func.Out[str]) -> str:
    row.set("{}")
    return "saved"
"""


def test_an_app_with_an_output_funcstack_cannot_honour_does_not_start(tmp_path: Path) -> None:
    """A function whose table output would be dropped never runs: the host does not start,
    and says which function, which binding and why."""
    app_dir = make_app_dir(tmp_path, "sample_http_app.py", {"AzureWebJobsStorage": "x"})
    (app_dir / "function_app.py").write_text(REFUSED_APP)
    with pytest.raises(RunnerStartError) as refused:
        start_runner(app_dir=app_dir, log_path=tmp_path / "runner.log")
    assert (
        "function 'save_order', binding 'row' (table, out): Azure Tables bindings are not "
        "served" in str(refused.value)
    )
