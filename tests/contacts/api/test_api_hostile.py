"""Hostile input over real HTTP: what the host and the app answer together (the local Functions
host on the local stack, or a deployed app: `--deployed`), and bounded waits against a store
that hangs (the real azure-cosmos SDK; local only)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from azure.cosmos import CosmosClient
from pydantic import SecretStr

from cosmos_outbox.cosmos import CosmosDocumentStore, client_options
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.services import services_from_settings
from cosmos_outbox.settings import OutboxSettings
from domain.contact import Contact
from domain.values import Company, Name
from funcstack.deadlines import SHORT
from tests.contacts.outboxes import outbox_on
from tools.httpclient import Client
from tools.stack import Stack

pytestmark = pytest.mark.integration

ADA = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "hostile@example.com",
    "companyName": "Engines",
}


def problem(reply: Any, status: int) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert (reply.header("content-type") or "").startswith("application/problem+json")
    doc: dict[str, Any] = reply.json()
    assert doc["status"] == status and doc["type"] and doc["title"] and doc["detail"]
    return doc


def test_an_unknown_route_is_a_404_problem_document(client: Client) -> None:
    problem(client.request("GET", "/no/such/route"), 404)
    problem(client.request("GET", "/"), 404)


def test_a_known_route_with_a_wrong_method_is_405_with_allow(client: Client) -> None:
    reply = client.request("PUT", "/contacts/abc")
    problem(reply, 405)
    assert reply.header("allow") == "DELETE, GET, PATCH"
    reply = client.request("GET", "/contacts/abc/update-name")
    problem(reply, 405)
    assert reply.header("allow") == "POST"


def test_204_and_304_have_no_body(client: Client) -> None:
    created = client.request("POST", "/contacts", json_body=ADA)
    cid, etag = created.json()["id"], created.header("etag") or ""
    not_modified = client.request("GET", f"/contacts/{cid}", headers={"If-None-Match": "*"})
    assert not_modified.status == 304 and not_modified.body == b""
    assert not_modified.header("etag") == etag
    no_content = client.request(
        "POST",
        f"/contacts/{cid}/update-description",
        json_body={"description": "d"},
        headers={"If-Match": etag},
    )
    assert no_content.status == 204 and no_content.body == b""


def test_hostile_bodies_are_400_and_write_nothing(client: Client) -> None:
    before = client.request("GET", "/contacts?pageSize=100").json()["items"]
    for raw in (
        b"[" * 5000 + b"]" * 5000,
        b'{"firstName":' + b"1" * 10000 + b"}",
        b'{"a":1,"a":2}',
        b'{"firstName":"\\u0000"}',
        b"\xff\xfe{",
    ):
        problem(
            client.request(
                "POST", "/contacts", raw=raw, headers={"content-type": "application/json"}
            ),
            400,
        )
    assert client.request("GET", "/contacts?pageSize=100").json()["items"] == before


def test_names_in_every_script_are_accepted_and_blank_looking_ones_refused(
    client: Client,
) -> None:
    for name in ("مهر\u200cآذر", "क्\u200dष", "👨\u200d👩\u200d👧\u200d👦", "Zoë 👩\u200d🔬"):
        reply = client.request("POST", "/contacts", json_body={**ADA, "firstName": name})
        assert reply.status == 201, reply.body
        assert reply.json()["name"]["firstName"] == name
    for name in ("\u3164", "\u2800", "\u0301", "\ue000", "\ufffe", "\ufffd"):
        doc = problem(
            client.request("POST", "/contacts", json_body={**ADA, "firstName": name}), 400
        )
        assert doc["errors"][0]["field"] == "firstName"


def test_an_id_route_never_answers_the_list_nor_contradicts_itself(client: Client) -> None:
    problem(client.request("GET", "/contacts//x"), 404)
    problem(client.request("GET", "/contacts//"), 404)
    doc = problem(client.request("GET", "/contacts/%2F"), 400)  # the id "%2F", not the list
    assert "items" not in doc


def test_the_host_refuses_over_long_urls_and_headers_without_echo(client: Client) -> None:
    long_url = client.request("GET", "/contacts/" + "a" * 9000)
    assert (long_url.status, long_url.body) == (414, b"")
    client.close()
    big = {f"x-h{i}": "v" * 500 for i in range(70)}
    headers = client.request("GET", "/contacts", headers=big)
    assert (headers.status, headers.body) == (431, b"")
    client.close()


@pytest.fixture
def hung_store() -> Iterator[int]:
    """A TCP endpoint that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        server.close()
        for conn in accepted:
            conn.close()


@pytest.mark.local_stack("the store adapter in this process, against a socket that never answers")
@pytest.mark.timeout(SHORT)
def test_a_hung_store_is_a_store_unavailable_error_not_a_hang(hung_store: int) -> None:
    """The client timeouts bound every wait (5 s: 2 s to connect, 3 s to read): without them
    the SDK waits 65 s for each read, and retries, and the test's own deadline (pytest-timeout,
    SHORT, generous for the client's 5 s) fails it. No duration is asserted."""
    settings = OutboxSettings.model_validate(
        {
            "CosmosDBConnection": SecretStr(
                f"AccountEndpoint=https://127.0.0.1:{hung_store}/;AccountKey=a2V5;"
            ),
            "COSMOS_CONTAINER": "contacts",
        }
    )
    with pytest.raises(StoreUnavailableError):
        services_from_settings(settings).store.ping()


class HangingProxy:
    """Forwards TCP to the local Cosmos endpoint until `hang()`; from then on it swallows
    everything (open connections included) and answers nothing."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.hanging = threading.Event()
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = int(self.server.getsockname()[1])
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.sockets += [conn, upstream]
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if not self.hanging.is_set():
                    sink.sendall(data)
        except OSError:
            return

    def hang(self) -> None:
        self.hanging.set()

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@pytest.mark.local_stack("a proxy in front of the local Cosmos DB endpoint that stops answering")
@pytest.mark.timeout(SHORT)
def test_a_store_that_hangs_after_start_fails_reads_and_writes_within_the_bound(
    stack: Stack,
) -> None:
    """Reads and batches on a working client, then the store stops answering: each call ends in
    StoreUnavailableError (503), never a hang: the test's deadline (pytest-timeout, SHORT) is
    generous for the client's 5 s and short of the SDK's default 65 s read timeout, retried."""
    assert stack.cosmos is not None
    proxy = HangingProxy(stack.cosmos.port)
    try:
        settings = OutboxSettings.model_validate(
            {
                "CosmosDBConnection": SecretStr(stack.cosmos.connection_string),
                "COSMOS_DATABASE": stack.settings()["COSMOS_DATABASE"],
                "COSMOS_CONTAINER": "contacts",
            }
        )
        # The production options; endpoint discovery off only so that the SDK keeps talking to
        # the proxy instead of the endpoint the account advertises; the endpoint's certificate
        # verified through the proxy (client_options: under the name 127.0.0.1 too).
        client = CosmosClient(
            f"https://127.0.0.1:{proxy.port}/",
            credential=stack.cosmos.key,
            enable_endpoint_discovery=False,
            **client_options(),
            **stack.cosmos.client_options(),
        )
        store = CosmosDocumentStore(
            client.get_database_client(settings.cosmos_database).get_container_client(
                settings.cosmos_container
            )
        )
        store.ping()
        proxy.hang()
        with pytest.raises(StoreUnavailableError):
            store.ping()
        with pytest.raises(StoreUnavailableError), outbox_on(store).unit_of_work() as unit:
            unit.repository(Contact).add(
                Contact.create(
                    name=Name(first_name="H", last_name="S"),
                    email="h@example.com",
                    company=Company(company_name="C"),
                )
            )
            unit.commit()
    finally:
        proxy.close()
