"""The claim check's Blob Storage adapter held to the payload store contract (the one the
in-memory fake passes) against a real Azurite, through the unmodified azure-storage-blob SDK:
bodies byte for byte by their URL, overwrites, foreign references refused without a request,
and Azurite stopped for real for the outage."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from cosmos_outbox._records import OutboxRecord, payload_name
from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.testing.contracts import PayloadStoreContract, PayloadWorld
from funcstack.services import LocalServices

pytestmark = pytest.mark.integration
CONTAINER = "outbox-payloads"


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServices]:
    services = LocalServices(workdir=Path(tmp_path_factory.mktemp("azurite")))
    try:
        azurite = services.run_azurite()
        with BlobServiceClient.from_connection_string(azurite.connection_string) as service:
            service.create_container(CONTAINER)
            service.create_container("other")
        yield services
    finally:
        services.stop()


def store(services: LocalServices, container: str = CONTAINER) -> BlobPayloadStore:
    assert services.azurite is not None
    return BlobPayloadStore.from_connection_string(services.azurite.connection_string, container)


class AzuriteWorld(PayloadWorld):
    def __init__(self, services: LocalServices) -> None:
        self.services = services
        self.store = store(services)
        self.foreign_reference = store(services, "other").reference("ticket/t1/e1")

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        self.services.stop_part("azurite")
        try:
            yield
        finally:
            self.services.run_azurite()  # on its ports, with its data


class TestBlobPayloadStore(PayloadStoreContract):
    @pytest.fixture
    def world(self, azurite: LocalServices) -> PayloadWorld:
        return AzuriteWorld(azurite)


def test_a_payload_is_a_private_blob_with_the_events_content_type_named_by_the_event(
    azurite: LocalServices,
) -> None:
    record = OutboxRecord(event_id="e-1", aggregate_type="manuscript", aggregate_id="m/1",
                          action="Revised", version=2, event_source="/manuscripts", body=b"{}")
    payloads = store(azurite)
    name = payload_name(record)
    payloads.put(name, b'{"text":"x"}', content_type="application/json")
    assert name == "manuscript/m%2F1/e-1"
    assert azurite.azurite is not None
    with BlobServiceClient.from_connection_string(azurite.azurite.connection_string) as service:
        container = service.get_container_client(CONTAINER)
        properties = container.get_blob_client(name).get_blob_properties()
        assert properties.content_settings.content_type == "application/json"
        assert properties.size == len(b'{"text":"x"}')
        assert container.get_container_properties().public_access is None  # private
    reference = payloads.reference(name)
    assert reference.startswith(f"http://127.0.0.1:{azurite.azurite.ports[0]}/devstoreaccount1/"
                                f"{CONTAINER}/manuscript/")


def test_a_missing_container_fails_the_upload_naming_it(azurite: LocalServices) -> None:
    from cosmos_outbox.errors import PayloadStoreError

    with pytest.raises(PayloadStoreError, match="no-such-container"):
        store(azurite, "no-such-container").put("a/b/c", b"{}", content_type="application/json")
