"""Every route end to end over real HTTP: host -> function_app -> azure-cosmos SDK -> Cosmos DB;
the local stack's, or a deployed app's (`--deployed`: tools/target.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from funcstack.deadlines import LOOPBACK, SHORT
from tools.httpclient import Client, Reply
from tools.target import Target

pytestmark = pytest.mark.integration

ADA = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "ada@example.com",
    "companyName": "Engines",
}


def create(client: Client, **changes: Any) -> Reply:
    reply = client.request("POST", "/contacts", json_body=ADA | changes)
    assert reply.status == 201, reply.body
    return reply


def problem(reply: Reply, status: int) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert (reply.header("content-type") or "").startswith("application/problem+json")
    doc: dict[str, Any] = reply.json()
    assert doc["status"] == status
    assert b"Traceback" not in reply.body
    return doc


def test_create_read_and_conditional_get(client: Client) -> None:
    created = create(client)
    contact = created.json()
    location, etag = created.header("location"), created.header("etag")
    assert location == f"/api/contacts/{contact['id']}" and etag
    read = client.request("GET", f"/contacts/{contact['id']}")
    assert read.status == 200 and read.header("etag") == etag
    assert read.json() == contact
    assert (
        client.request("GET", f"/contacts/{contact['id']}", headers={"If-None-Match": etag}).status
        == 304
    )


def test_patch_and_reference_routes_move_the_etag_and_version(client: Client) -> None:
    created = create(client, email="patch@example.com")
    cid, etag = created.json()["id"], created.header("etag") or ""
    patched = client.request(
        "PATCH",
        f"/contacts/{cid}",
        headers={"If-Match": etag},
        json_body={"name": {"firstName": "Augusta", "lastName": "King"}, "description": "maths"},
    )
    assert patched.status == 200 and patched.json()["version"] == 3
    etag2 = patched.header("etag")
    assert etag2 != etag
    for suffix, body in (
        ("update-name", {"firstName": "A", "lastName": "K"}),
        ("update-email", {"email": "k@example.com"}),
        ("update-description", {"description": "d"}),
        (
            "update-company",
            {
                "companyName": "C",
                "street": "S",
                "houseNumber": "1",
                "postalCode": "P",
                "city": "Ci",
                "country": "Co",
            },
        ),
    ):
        reply = client.request(
            "POST", f"/contacts/{cid}/{suffix}", json_body=body, headers={"ETag": etag2 or ""}
        )
        assert reply.status == 204, reply.body
        etag2 = reply.header("etag")
    final = client.request("GET", f"/contacts/{cid}").json()
    assert final["version"] == 7 and final["company"]["city"] == "Ci"


def test_stale_etag_is_412(client: Client) -> None:
    created = create(client, email="stale@example.com")
    cid, etag = created.json()["id"], created.header("etag") or ""
    assert (
        client.request(
            "POST",
            f"/contacts/{cid}/update-email",
            headers={"If-Match": etag},
            json_body={"email": "new@example.com"},
        ).status
        == 204
    )
    problem(
        client.request(
            "POST",
            f"/contacts/{cid}/update-email",
            headers={"If-Match": etag},
            json_body={"email": "newer@example.com"},
        ),
        412,
    )
    assert client.request("GET", f"/contacts/{cid}").json()["email"] == "new@example.com"


def test_delete_then_404(client: Client) -> None:
    cid = create(client, email="gone@example.com").json()["id"]
    deleted = client.request("DELETE", f"/contacts/{cid}")
    assert deleted.status == 204 and deleted.header("etag")
    problem(client.request("GET", f"/contacts/{cid}"), 404)
    problem(client.request("DELETE", f"/contacts/{cid}"), 404)


def test_paging_with_continuation_in_query_and_header(client: Client) -> None:
    for i in range(5):
        create(client, email=f"page{i}@example.com")
    seen: list[str] = []
    token: str | None = None
    for i in range(100):
        if token is None:
            reply = client.request("GET", "/contacts?pageSize=2")
        elif i % 2:
            reply = client.request(
                "GET", "/contacts?pageSize=2", headers={"x-continuation-token": token}
            )
        else:
            from urllib.parse import quote

            reply = client.request("GET", f"/contacts?pageSize=2&continuationToken={quote(token)}")
        assert reply.status == 200, reply.body
        page = reply.json()
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        token = page["continuationToken"]
        assert page["hasMore"] == (token is not None)
        if token is None:
            assert reply.header("x-continuation-token") is None
            break
        assert reply.header("x-continuation-token") == token
    assert len(seen) == len(set(seen)) >= 5


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("POST", "/contacts", {"json_body": {"firstName": ""}}, 400),
        (
            "POST",
            "/contacts",
            {"raw": b"{nope", "headers": {"content-type": "application/json"}},
            400,
        ),
        (
            "POST",
            "/contacts",
            {"raw": b"a=b", "headers": {"content-type": "application/x-www-form-urlencoded"}},
            415,
        ),
        ("POST", "/contacts", {"json_body": ADA | {"description": "x" * 70000}}, 413),
        ("GET", "/contacts/00000000-0000-0000-0000-000000000000", {}, 404),
        ("GET", "/contacts?pageSize=500", {}, 400),
        ("GET", "/contacts?continuationToken=garbage", {}, 400),
    ],
)
def test_errors_are_problem_documents(
    client: Client, method: str, path: str, kwargs: dict[str, Any], status: int
) -> None:
    problem(client.request(method, path, **kwargs), status)


def test_health_and_openapi(client: Client) -> None:
    health = client.request("GET", "/health")
    assert health.status == 200 and health.json() == {"status": "healthy"}
    spec = client.request("GET", "/openapi.json")
    assert spec.status == 200 and spec.json()["openapi"] == "3.1.0"


def test_two_racing_updates_with_the_same_etag_one_wins_one_gets_412(
    client: Client, target: Target
) -> None:
    created = create(client, email="race@example.com")
    cid, etag = created.json()["id"], created.header("etag") or ""
    results: list[int] = []
    barrier = threading.Barrier(2)

    def update(description: str) -> None:
        c = target.client()
        try:
            barrier.wait(LOOPBACK)  # both threads started
            results.append(
                c.request(
                    "POST",
                    f"/contacts/{cid}/update-description",
                    headers={"If-Match": etag},
                    json_body={"description": description},
                ).status
            )
        finally:
            c.close()

    threads = [threading.Thread(target=update, args=(d,)) for d in ("first", "second")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(SHORT)  # its request answered (the client's own timeout)
        assert not t.is_alive(), f"an update not answered within {SHORT:g} s"
    assert sorted(results) == [204, 412]
    final = client.request("GET", f"/contacts/{cid}").json()
    assert final["version"] == 2 and final["description"] in ("first", "second")
