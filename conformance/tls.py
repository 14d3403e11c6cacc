"""A throw-away certificate authority and a localhost server certificate for the local
endpoints, plus a CA bundle (certifi's roots + this CA) for the clients of one run: funcstack's
local authority (``funcstack.cosmos.local_tls``), made in the run's own folder.

The Azure SDK suites build their clients with TLS verification on, as against the service;
trusting the local CA is the same step as importing the official emulator's certificate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from funcstack.cosmos import local_tls


@dataclass(frozen=True)
class TlsFiles:
    cert: Path
    key: Path
    bundle: Path


def make_tls(directory: Path) -> TlsFiles:
    made = local_tls(folder=directory)
    return TlsFiles(cert=made.cert_file, key=made.key_file, bundle=made.bundle_file)
