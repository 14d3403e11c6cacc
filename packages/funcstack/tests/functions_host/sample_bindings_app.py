"""Sample v2 app with input and output bindings (copied into a temp dir as function_app.py): the
behaviours azure-functions-python-worker's end-to-end "stein" apps check (blob, queue, Service
Bus, Cosmos DB, HTTP outputs), in functions of our own. Connections: AzureWebJobsStorage,
CosmosConn, ServiceBusConn; names: the settings BLOBS, QUEUE_PREFIX, SB_QUEUE, SB_TOPIC."""

from __future__ import annotations

import hashlib
import io
import json
import typing

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)

STORAGE = "AzureWebJobsStorage"
COSMOS = "CosmosConn"
BUS = "ServiceBusConn"


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


# -- blob input and output -----------------------------------------------------------------


@app.route(route="blob/str", methods=["POST"])
@app.blob_output(arg_name="file", path="%BLOBS%/str.txt", connection=STORAGE)
def put_blob_str(req: func.HttpRequest, file: func.Out[str]) -> str:
    file.set(req.get_body().decode("utf-8"))
    return "OK"


@app.route(route="blob/str", methods=["GET"])
@app.blob_input(
    arg_name="file", path="%BLOBS%/str.txt", data_type=func.DataType.STRING, connection=STORAGE
)
def get_blob_str(req: func.HttpRequest, file: str) -> str:
    assert isinstance(file, str)
    return file


@app.route(route="blob/bytes", methods=["POST"])
@app.blob_output(arg_name="file", path="%BLOBS%/bytes.bin", connection=STORAGE)
def put_blob_bytes(req: func.HttpRequest, file: func.Out[bytes]) -> str:
    file.set(req.get_body())
    return "OK"


@app.route(route="blob/bytes", methods=["GET"])
@app.blob_input(
    arg_name="file", path="%BLOBS%/bytes.bin", data_type=func.DataType.BINARY, connection=STORAGE
)
def get_blob_bytes(req: func.HttpRequest, file: bytes) -> func.HttpResponse:
    assert isinstance(file, bytes)
    return func.HttpResponse(json.dumps({"size": len(file), "md5": _md5(file)}))


@app.route(route="blob/bytes/text", methods=["GET"])
@app.blob_input(
    arg_name="file", path="%BLOBS%/bytes.bin", data_type=func.DataType.BINARY, connection=STORAGE
)
def get_blob_bytes_as_text(req: func.HttpRequest, file: bytes) -> str:
    return file.decode("utf-8")


@app.route(route="blob/filelike", methods=["POST"])
@app.blob_output(arg_name="file", path="%BLOBS%/filelike.txt", connection=STORAGE)
def put_blob_filelike(req: func.HttpRequest, file: func.Out[io.StringIO]) -> str:
    file.set(io.StringIO("filelike"))
    return "OK"


@app.route(route="blob/return", methods=["POST"], binding_arg_name="resp")
@app.blob_output(arg_name="$return", path="%BLOBS%/return.txt", connection=STORAGE)
def put_blob_return(req: func.HttpRequest, resp: func.Out[func.HttpResponse]) -> str:
    return "FROM RETURN"


@app.function_name("put_blob_generic")
@app.generic_trigger(arg_name="req", type="httpTrigger", route="blob/generic")
@app.generic_output_binding(
    arg_name="$return", type="blob", path="%BLOBS%/generic.txt", connection=STORAGE
)
def put_blob_generic(req: func.HttpRequest) -> str:
    return "GENERIC RETURN"


@app.route(route="blob/read/{name}", methods=["GET"])
@app.blob_input(arg_name="file", path="%BLOBS%/{name}", connection=STORAGE)
def read_blob(req: func.HttpRequest, file: func.InputStream) -> func.HttpResponse:
    if file is None:  # a blob that does not exist
        return func.HttpResponse("missing", status_code=404)  # type: ignore[unreachable]
    return func.HttpResponse(file.read())


@app.route(route="blob/multiple", methods=["POST"])
@app.blob_input(
    arg_name="in1", path="%BLOBS%/in-1.bin", data_type=func.DataType.BINARY, connection=STORAGE
)
@app.blob_input(
    arg_name="in2", path="%BLOBS%/in-2.bin", data_type=func.DataType.BINARY, connection=STORAGE
)
@app.blob_output(
    arg_name="out1", path="%BLOBS%/out-1.bin", data_type=func.DataType.BINARY, connection=STORAGE
)
@app.blob_output(
    arg_name="out2", path="%BLOBS%/out-2.bin", data_type=func.DataType.BINARY, connection=STORAGE
)
def multiple_blobs(
    req: func.HttpRequest,
    in1: bytes,
    in2: bytes,
    out1: func.Out[bytes],
    out2: func.Out[bytes],
) -> func.HttpResponse:
    out1.set(in1[::-1])
    out2.set(in2 + in1)
    return func.HttpResponse(json.dumps({"in1": _md5(in1), "in2": _md5(in2)}))


@app.blob_trigger(arg_name="file", path="%BLOBS%-in/{name}.txt", connection=STORAGE)
@app.blob_output(arg_name="$return", path="%BLOBS%/triggered-{name}.json", connection=STORAGE)
def on_blob(file: func.InputStream) -> str:
    content = file.read().decode("utf-8")
    return json.dumps({"name": file.name, "length": file.length, "content": content})


# -- Storage queue output ------------------------------------------------------------------


@app.route(route="queue/put", methods=["POST"])
@app.queue_output(arg_name="msg", queue_name="%QUEUE_PREFIX%-basic", connection=STORAGE)
def put_queue(req: func.HttpRequest, msg: func.Out[str]) -> str:
    msg.set(req.get_body())  # type: ignore[arg-type]  # bytes, as the stein app sets them
    return "OK"


@app.queue_trigger(arg_name="msg", queue_name="%QUEUE_PREFIX%-basic", connection=STORAGE)
@app.blob_output(arg_name="$return", path="%BLOBS%/queue-basic.json", connection=STORAGE)
def on_queue(msg: func.QueueMessage) -> str:
    return json.dumps(
        {
            "id": msg.id,
            "body": msg.get_body().decode("utf-8"),
            "expiration_time": msg.expiration_time.isoformat() if msg.expiration_time else None,
            "insertion_time": msg.insertion_time.isoformat() if msg.insertion_time else None,
            "time_next_visible": (
                msg.time_next_visible.isoformat() if msg.time_next_visible else None
            ),
            "pop_receipt": msg.pop_receipt,
            "dequeue_count": msg.dequeue_count,
        }
    )


@app.queue_trigger(arg_name="msg", queue_name="%QUEUE_PREFIX%-badout", connection=STORAGE)
@app.blob_output(arg_name="$return", path="%BLOBS%/{queueTrigger}", connection=STORAGE)
def on_queue_to_blob(msg: func.QueueMessage) -> str:
    return "written to the blob the message names"


@app.route(route="queue/return", methods=["POST"], binding_arg_name="resp")
@app.queue_output(arg_name="$return", queue_name="%QUEUE_PREFIX%-return", connection=STORAGE)
def put_queue_return(req: func.HttpRequest, resp: func.Out[str]) -> bytes:
    return req.get_body()


@app.queue_trigger(arg_name="msg", queue_name="%QUEUE_PREFIX%-return", connection=STORAGE)
@app.blob_output(arg_name="$return", path="%BLOBS%/queue-return.txt", connection=STORAGE)
def on_queue_return(msg: func.QueueMessage) -> bytes:
    return msg.get_body()


@app.route(route="queue/message", methods=["POST"], binding_arg_name="resp")
@app.queue_output(arg_name="$return", queue_name="%QUEUE_PREFIX%-message", connection=STORAGE)
def put_queue_message(req: func.HttpRequest, resp: func.Out[str]) -> func.QueueMessage:
    return func.QueueMessage(body=req.get_body())


@app.route(route="queue/both", methods=["POST"], binding_arg_name="resp")
@app.queue_output(arg_name="msg", queue_name="%QUEUE_PREFIX%-both", connection=STORAGE)
def put_queue_and_answer(
    req: func.HttpRequest, resp: func.Out[func.HttpResponse], msg: func.Out[func.QueueMessage]
) -> None:
    data = req.get_body().decode()
    msg.set(func.QueueMessage(body=data))
    resp.set(func.HttpResponse(body=f"HTTP response: {data}", status_code=201))


@app.route(route="queue/many", methods=["POST"], binding_arg_name="resp")
@app.queue_output(arg_name="msgs", queue_name="%QUEUE_PREFIX%-many", connection=STORAGE)
def put_queue_many(
    req: func.HttpRequest,
    resp: func.Out[str],
    msgs: func.Out[typing.List[str]],  # noqa: UP006 (the library refuses list[str])
) -> None:
    msgs.set(["one", "two"])


# -- Service Bus output --------------------------------------------------------------------


@app.route(route="bus/queue", methods=["POST"])
@app.service_bus_queue_output(arg_name="msg", queue_name="%SB_QUEUE%", connection=BUS)
def put_message(req: func.HttpRequest, msg: func.Out[str]) -> str:
    msg.set(req.get_body().decode("utf-8"))
    return "OK"


@app.service_bus_queue_trigger(arg_name="msg", queue_name="%SB_QUEUE%", connection=BUS)
@app.blob_output(arg_name="$return", path="%BLOBS%/bus.json", connection=STORAGE)
def on_message(msg: func.ServiceBusMessage) -> str:
    def moment(value: object) -> object:
        return value.isoformat() if value is not None else None  # type: ignore[attr-defined]

    return json.dumps(
        {
            "message_id": msg.message_id,
            "body": msg.get_body().decode("utf-8"),
            "content_type": msg.content_type,
            "delivery_count": msg.delivery_count,
            "enqueued_time_utc": moment(msg.enqueued_time_utc),
            "expires_at_utc": moment(msg.expires_at_utc),
            "locked_until": moment(msg.locked_until),
            "lock_token": msg.lock_token,
            "sequence_number": msg.sequence_number,
            "application_properties": msg.application_properties,
        }
    )


@app.route(route="bus/topic", methods=["POST"])
@app.service_bus_topic_output(arg_name="msg", topic_name="%SB_TOPIC%", connection=BUS)
def put_topic(req: func.HttpRequest, msg: func.Out[str]) -> str:
    msg.set(req.get_body().decode("utf-8"))
    return "OK"


# -- Cosmos DB input and output ------------------------------------------------------------


@app.route(route="cosmos/put", methods=["POST"])
@app.cosmos_db_output(
    arg_name="doc",
    database_name="%DATABASE%",
    container_name="items",
    create_if_not_exists=True,
    partition_key="/id",
    connection=COSMOS,
)
def put_document(req: func.HttpRequest, doc: func.Out[func.Document]) -> str:
    doc.set(func.Document.from_json(req.get_body().decode("utf-8")))
    return "OK"


@app.route(route="cosmos/many", methods=["POST"])
@app.cosmos_db_output(
    arg_name="docs", database_name="%DATABASE%", container_name="items", connection=COSMOS
)
def put_documents(req: func.HttpRequest, docs: func.Out[func.DocumentList]) -> str:
    docs.set(func.DocumentList(func.Document.from_dict(d) for d in req.get_json()))
    return "OK"


@app.route(route="cosmos/missing", methods=["POST"])
@app.cosmos_db_output(
    arg_name="doc", database_name="%DATABASE%", container_name="missing", connection=COSMOS
)
def put_document_nowhere(req: func.HttpRequest, doc: func.Out[func.Document]) -> str:
    doc.set(func.Document.from_json(req.get_body().decode("utf-8")))
    return "OK"


@app.route(route="cosmos/doc/{id}", methods=["GET"])
@app.cosmos_db_input(
    arg_name="docs",
    database_name="%DATABASE%",
    container_name="items",
    id="{id}",
    partition_key="{id}",
    connection=COSMOS,
)
def get_document(req: func.HttpRequest, docs: func.DocumentList) -> func.HttpResponse:
    if not docs:
        return func.HttpResponse("none", status_code=404)
    return func.HttpResponse(docs[0].to_json(), mimetype="application/json")


@app.route(route="cosmos/nopk/{id}", methods=["GET"])
@app.cosmos_db_input(
    arg_name="docs",
    database_name="%DATABASE%",
    container_name="nopk",
    id="{id}",
    connection=COSMOS,
)
def get_document_without_key(req: func.HttpRequest, docs: func.DocumentList) -> str:
    return func.HttpResponse(docs[0].to_json(), mimetype="application/json")  # type: ignore[return-value]


@app.route(route="cosmos/nowhere", methods=["GET"])
@app.cosmos_db_input(
    arg_name="docs",
    database_name="%DATABASE%",
    container_name="missing",
    sql_query="SELECT * FROM c",
    connection=COSMOS,
)
def query_nowhere(req: func.HttpRequest, docs: func.DocumentList) -> str:
    return "unreachable: the input cannot be read"


@app.route(route="cosmos/category/{category}", methods=["GET"])
@app.cosmos_db_input(
    arg_name="docs",
    database_name="%DATABASE%",
    container_name="items",
    sql_query="SELECT * FROM c WHERE c.category = {category} AND c.tier = {tier}",
    connection=COSMOS,
)
def query_documents(req: func.HttpRequest, docs: func.DocumentList) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(sorted(d["id"] for d in docs)))


@app.cosmos_db_trigger(
    arg_name="docs",
    database_name="%DATABASE%",
    container_name="items",
    lease_container_name="leases",
    create_lease_container_if_not_exists=True,
    connection=COSMOS,
)
@app.blob_output(arg_name="$return", path="%BLOBS%/cosmos-{rand-guid}.json", connection=STORAGE)
def on_documents(docs: func.DocumentList) -> str:
    return json.dumps([d.to_dict() for d in docs])
