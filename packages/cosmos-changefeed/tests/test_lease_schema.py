"""The lease documents are the .NET processor's, field by field and in its order: fixtures of
leases the .NET source builds (tests/fixtures/dotnet_leases.json says where each comes from),
read and written back; the ids as .NET forms them; the time as Newtonsoft writes it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from cosmos_changefeed import Lease, lease_prefix
from cosmos_changefeed._leases import format_time, parse_time
from cosmos_changefeed._names import database_rid, info_id, lease_id, lock_id
from cosmos_changefeed._protocol import Create, Flow, LeaseManager
from cosmos_changefeed._ranges import EpkRange
from cosmos_changefeed._splits import ChildLease

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "dotnet_leases.json").read_text())
#: What .NET writes into the body and the service overwrites.
SERVICE_FIELDS = {"_etag", "_ts"}


def created(flow: Flow) -> dict[str, Any]:
    """The document a creation flow writes (its first operation)."""
    op = next(flow)
    assert isinstance(op, Create)
    return op.document


def without_service_fields(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(k, v) for k, v in doc.items() if k not in SERVICE_FIELDS]


@pytest.mark.parametrize("fixture", FIXTURES["write"], ids=lambda f: f["name"])
def test_a_lease_dotnet_wrote_is_written_back_as_dotnet_writes_it(fixture: dict[str, Any]) -> None:
    read = fixture.get("read", fixture["json"])
    written = Lease.from_document(read).to_document()
    assert list(written.items()) == without_service_fields(fixture["json"])


def test_the_fields_of_a_version_0_lease_are_read_as_dotnet_reads_them() -> None:
    doc = next(f["json"] for f in FIXTURES["write"] if "checkpointed" in f["name"])
    lease = Lease.from_document(doc)
    assert lease.version == 0
    assert lease.lease_token == "3"
    assert lease.feed_range == EpkRange("05C1DFFFFFFFFC", "0BC3BFFFFFFFF8")
    assert lease.owner == "instance-1"
    assert lease.continuation == '"4242"'
    assert lease.etag == '"00000000-0000-0000-0000-000000000000"'
    assert lease.mode == "Incremental Feed"
    assert lease.last_updated == dt.datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)


def test_a_lease_never_updated_is_as_old_as_its_ts_and_one_without_version_is_version_0() -> None:
    read = FIXTURES["read"][0]
    lease = Lease.from_document(read["json"])
    for name, value in read["expect"].items():
        assert getattr(lease, name) == value
    assert Lease.from_document({"id": "x", "LeaseToken": "0", "_ts": 60}).last_updated == (
        dt.datetime(1970, 1, 1, 0, 1, tzinfo=dt.UTC)
    )


def test_new_leases_are_those_dotnet_creates() -> None:
    prefix = "myProcessoracct.documents.azure.com_jTJ4AA==_jTJ4AL9TABw="
    docs = {f["name"]: f["json"] for f in FIXTURES["write"]}
    by_pk = LeaseManager(prefix, "me", partition_key_path="/partitionKey", mode="LatestVersion")
    flow = by_pk.create_lease(ChildLease(EpkRange("", "05C1DFFFFFFFFC"), "0"), None)
    assert list(created(flow).items()) == without_service_fields(
        docs["a new version-0 lease (lease container on /partitionKey)"]
    )
    by_id = LeaseManager(prefix, "me", partition_key_path="/id", mode="LatestVersion")
    merged = by_id.create_lease(ChildLease(EpkRange("05C1DFFFFFFFFC", "0BC3BFFFFFFFF8")), '"4242"')
    assert list(created(merged).items()) == without_service_fields(
        docs["the EPK lease a merge leaves"]
    )


def test_the_mode_of_a_lease_is_the_a_im_header_of_its_feed() -> None:
    for mode, value in (
        ("LatestVersion", "Incremental Feed"),
        ("AllVersionsAndDeletes", "Full-Fidelity Feed"),
    ):
        manager = LeaseManager("p", "me", partition_key_path="/id", mode=mode)
        assert (
            created(manager.create_lease(ChildLease(EpkRange.full(), "0"), None))["Mode"] == value
        )
    manager = LeaseManager("p", "me", partition_key_path="/id", mode="AllVersionsAndDeletes")
    with pytest.raises(
        ValueError,
        match="Switching ChangeFeedMode Incremental Feed to Full-Fidelity Feed is not allowed",
    ):
        manager.check_mode([Lease.from_document({"id": "p..0", "LeaseToken": "0"})])


def test_ids_are_the_processor_name_the_account_host_and_the_resource_ids() -> None:
    # GetLeasePrefix: no separator after the processor's name; the host without scheme or port
    prefix = lease_prefix("myProcessor", "https://acct.documents.azure.com:443/", "jTJ4AL9TABw=")
    assert prefix == "myProcessoracct.documents.azure.com_jTJ4AA==_jTJ4AL9TABw="
    assert lease_id(prefix, "0") == f"{prefix}..0"
    assert info_id(prefix) == f"{prefix}.info"
    assert lock_id(prefix) == f"{prefix}.lock"
    # ResourceId.DatabaseId: the first four bytes; the service writes '/' as '-'
    assert database_rid("ab-cAL9TABw=") == "ab-cAA=="


@pytest.mark.parametrize(
    ("endpoint", "host"),
    [
        ("https://[::ffff:127.0.0.1]:8081/", "[::ffff:127.0.0.1]"),  # funcstack's endpoint
        ("https://[::FFFF:7F00:1]:8081/", "[::ffff:127.0.0.1]"),
        ("https://[0:0:0:0:0:ffff:127.0.0.1]/", "[::ffff:127.0.0.1]"),
        ("https://[::1]:8081/", "[::1]"),
        ("https://[2001:DB8:0:0:1:0:0:1]/", "[2001:db8::1:0:0:1]"),  # the first run of zeros
        ("https://[::ffff:0.0.0.1]/", "[::ffff:0:1]"),  # .NET dots only a nonzero 7th group
        ("https://ACCT.documents.azure.com:443/", "acct.documents.azure.com"),
        ("https://acct.documents.azure.com/", "acct.documents.azure.com"),
        ("https://127.0.0.1:8081/", "127.0.0.1"),
    ],
)
def test_the_host_in_a_lease_id_is_dotnets_uri_host_whatever_the_endpoints_spelling(
    endpoint: str, host: str
) -> None:
    """``Uri.Host``: lower case, no port; an IPv6 literal in brackets, in dotnet/runtime's
    canonical form (``IPv6AddressHelper.ParseCanonicalName``): one lease id for one account."""
    assert lease_prefix("p", endpoint, "jTJ4AL9TABw=") == f"p{host}_jTJ4AA==_jTJ4AL9TABw="


def test_times_are_written_as_newtonsoft_writes_a_utc_datetime() -> None:
    moment = dt.datetime(2026, 1, 1, 12, 0, 0, 123450, tzinfo=dt.UTC)
    assert format_time(moment) == "2026-01-01T12:00:00.12345Z"
    assert format_time(moment.replace(microsecond=0)) == "2026-01-01T12:00:00Z"
    assert format_time(moment.replace(microsecond=1)) == "2026-01-01T12:00:00.000001Z"
    assert parse_time("2026-01-01T12:00:00.1234567Z") == moment.replace(microsecond=123456)
    assert parse_time("2026-01-01T13:00:00+01:00") == moment.replace(microsecond=0)
    assert parse_time(None) is None and parse_time("not a time") is None
