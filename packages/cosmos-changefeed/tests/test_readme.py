"""The README's first example runs as it is written: its first Python block, unchanged, in a
fresh interpreter, against funcstack's local Cosmos DB endpoint -- with ``COSMOS_ENDPOINT`` and
``COSMOS_KEY`` set as the README says, and a certificate the client trusts (made here, and
named by ``REQUESTS_CA_BUNDLE``, which azure-core's transport reads): the block creates its
database and containers, starts the processor, writes an order and sees it handled."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```python[^\n]*\n(?P<source>.*?)```", re.S)


def first_block() -> str:
    found = BLOCK.search(README.read_text(encoding="utf-8"))
    assert found is not None, "the README has no Python block"
    return found["source"]


def trusted_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert, key_file = folder / "cert.pem", folder / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key_file


@pytest.fixture(scope="module")
def trusted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CosmosEndpoint, Path]]:
    from funcstack.cosmos import start_cosmos

    cert, key = trusted_certificate(tmp_path_factory.mktemp("tls"))
    with start_cosmos(tls=(cert, key)) as endpoint:
        yield endpoint, cert


def test_the_readmes_first_example_runs_as_written(
    trusted: tuple[CosmosEndpoint, Path], tmp_path: Path
) -> None:
    endpoint, cert = trusted
    script = tmp_path / "first_processor.py"
    script.write_text(first_block(), encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "COSMOS_ENDPOINT": endpoint.endpoint,
            "COSMOS_KEY": endpoint.key,
            "REQUESTS_CA_BUNDLE": str(cert),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    assert "mail for order order-1" in ran.stdout
