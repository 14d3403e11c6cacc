"""The subscriber app is built by its composition root on the services it is given: its
functions read the projection through them (here an in-memory one), and nothing is built
before a function runs."""

from __future__ import annotations

import json

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.subscriber.aio import Projector
from cosmos_outbox_testing import FunctionClient, InMemoryStore
from tests.subscriber.test_http import TOKENS, InMemoryReads

from contacts_projection.bootstrap import Services, bootstrap  # isort: skip
from contacts_projection.projection import ContactProjection  # isort: skip


def test_the_functions_run_on_the_services_given_built_once_on_first_use() -> None:
    reads = InMemoryReads(3)
    built: list[Services] = []

    def services() -> Services:
        projector = Projector(InMemoryStore(), ContactProjection(), inbox_ttl_seconds=3600)
        built.append(Services(projector=projector, reads=reads, tokens=TOKENS))
        return built[-1]

    client = FunctionClient(bootstrap(services))
    assert built == []  # indexed, nothing built
    found = client.request("GET", "projections/contacts/c001")
    assert (found.status_code, json.loads(found.get_body())["id"]) == (200, "c001")
    listed = client.request("GET", "projections/contacts", params={"pageSize": "2"})
    assert json.loads(listed.get_body())["hasMore"] is True
    assert client.request("GET", "projections/contacts/c999").status_code == 404
    assert len(built) == 1
