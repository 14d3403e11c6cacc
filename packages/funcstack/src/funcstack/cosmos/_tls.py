"""A certificate for the local Cosmos DB endpoint that a client can trust and verify.

Azure's endpoints have certificates from public authorities, so a client verifies them with
its default trust store and prints nothing; the endpoint's package ships a self-signed
certificate, which a client can only accept by turning verification off
(``connection_verify=False``), and then urllib3 warns at every request
(``InsecureRequestWarning: Unverified HTTPS request``). Microsoft's emulator has the same
problem and the same answer: trust its certificate ("Export the Azure Cosmos DB emulator
certificate", learn.microsoft.com: import it, or point the SDK at it).

So funcstack makes a certificate authority of its own, once per machine (per cache folder:
``<cache>/tls/``, see ``funcstack._cache``), and the endpoint serves a certificate it signed
for ``localhost``, ``127.0.0.1``, ``::1``, ``::ffff:127.0.0.1`` and the host it listens on.
A client trusts that authority, and then verifies every request as it would against Azure.

azure-cosmos (sync and aio, 4.17: ``_synchronized_request.py``, ``aio/_asynchronous_request.py``)
turns verification off by itself, per request, for the hosts ``localhost`` and ``127.0.0.1``
("disabling the SSL verification for local emulator"), whatever the client was given, unless
it has an ``ssl_config``. So the endpoint is named ``https://[::ffff:127.0.0.1]:<port>/``
(``ADDRESS``: 127.0.0.1, written as IPv6 writes an IPv4 address; the same socket): the SDK
takes the path it takes for Azure, and verifies with the process's default trust store. A
client trusts the authority by one of:

* the environment: ``SSL_CERT_FILE`` (Python's ``ssl``, so aiohttp) and ``REQUESTS_CA_BUNDLE``
  (requests) naming the bundle of the authorities the environment trusted already and this
  one (``bundle_file``, ``LocalTls.environment()``), so the same process still verifies Azure's
  public endpoints. funcstack gives it to every host and process it starts
  (``trusting_environment``): an app verifies the endpoint as it verifies Azure, unchanged;
* ``CosmosEndpoint.client_options()`` for one azure-cosmos client (``CosmosClient(url, key,
  **options)``): an ``ssl_config`` naming this authority, which also verifies an endpoint named
  ``127.0.0.1`` or ``localhost``. The aio client then loads the ``ssl_config``'s client
  certificate pair unconditionally (azure-core's ``_build_ssl_config`` calls
  ``load_cert_chain(None, None)`` otherwise), so the options name one this authority signed,
  which the endpoint never asks for; and it makes an SSL context and a connection per request
  (azure-core builds one from a file path each time): fine for a test, not for an app;
* the authority's certificate (``ca.pem``) for any other client.

The authority's key stays in the cache folder (mode 0600) and signs nothing else; its
certificate is valid for 10 years, the endpoint's for 2 (issued again when it expires or
lacks a host asked for). Made under a file lock: test workers starting at once make it once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import certifi
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from funcstack._cache import _locked, cache_root

__all__ = ["ADDRESS", "LocalTls", "local_tls", "trusting_environment"]

CA_NAME = "funcstack local Cosmos DB CA"
#: 127.0.0.1 as the endpoint is named: IPv4-mapped, an address azure-cosmos verifies (above).
ADDRESS = "::ffff:127.0.0.1"
DEFAULT_HOSTS = ("localhost", "127.0.0.1", "::1", ADDRESS)
#: What names a process's trust store, in the order Python's ssl and requests read them.
TRUST_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
CA_YEARS = 10
SERVER_YEARS = 2
#: A certificate expiring sooner than this is issued again.
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class LocalTls:
    """The files of the local certificate authority and of the endpoint's certificate."""

    ca_file: Path  # the authority's certificate: what a client trusts
    #: The authorities this process's environment trusts (``trusted_base``) and this one
    #: (SSL_CERT_FILE, REQUESTS_CA_BUNDLE)
    bundle_file: Path
    cert_file: Path  # the endpoint's certificate (and the authority's, as its chain)
    key_file: Path  # the endpoint's key
    client_cert_file: Path  # a client certificate (azure-cosmos aio's ssl_config needs a pair)
    client_key_file: Path

    def environment(self) -> dict[str, str]:
        """The variables that make Python clients trust the endpoint (and what the environment
        trusted already): ``SSL_CERT_FILE`` and ``REQUESTS_CA_BUNDLE``, naming the bundle."""
        return {"REQUESTS_CA_BUNDLE": str(self.bundle_file), "SSL_CERT_FILE": str(self.bundle_file)}

    def client_options(self) -> dict[str, Any]:
        """The keyword arguments that make one azure-cosmos client (sync or aio) verify an
        endpoint this authority signed, under any of its names, in a process whose environment
        does not trust it: ``CosmosClient(url, key, **tls.client_options())``. An
        ``ssl_config`` naming the authority and the client pair the aio client needs (above)."""
        from azure.cosmos.documents import SSLConfiguration  # the SDK's, loaded when asked for

        config = SSLConfiguration()
        config.SSLCaCerts = str(self.ca_file)
        config.SSLCertFile = str(self.client_cert_file)
        config.SSLKeyFile = str(self.client_key_file)
        return {"connection_verify": str(self.ca_file), "ssl_config": config}


def trusting_environment(environment: dict[str, str]) -> dict[str, str]:
    """``environment`` (a child process's) with funcstack's local authority trusted besides
    what it trusted already (``LocalTls.environment()``, its bundle made from ``environment``'s
    trust store): what every host and process funcstack starts is given."""
    return {**environment, **local_tls(environment=environment).environment()}


def trusted_base(environment: Mapping[str, str]) -> Path:
    """The file of authorities a process with ``environment`` trusts: the first of
    ``TRUST_VARIABLES`` naming a file, else OpenSSL's default file, else certifi's (what
    requests trusts by default). A folder of certificates (``SSL_CERT_DIR``) is not read."""
    for name in TRUST_VARIABLES:
        value = environment.get(name)
        if value and Path(value).is_file():
            return Path(value)
    default = ssl.get_default_verify_paths().cafile
    if default and Path(default).is_file():
        return Path(default)
    return Path(certifi.where())


def local_tls(
    hosts: Iterable[str] = (),
    *,
    folder: Path | None = None,
    environment: Mapping[str, str] | None = None,
) -> LocalTls:
    """The local authority and a certificate of the endpoint for ``hosts`` (besides
    ``DEFAULT_HOSTS``; a wildcard address adds nothing), made or issued again when needed, in
    ``folder`` (default: ``<cache>/tls``; another folder: an authority of its own, such as a
    conformance run's throw-away one). ``bundle_file`` holds the authorities ``environment``
    (default: this process's) trusts and this one; a trust store that holds this authority
    already (a process funcstack started) is its own bundle."""
    folder = folder if folder is not None else cache_root() / "tls"
    base = trusted_base(os.environ if environment is None else environment)
    wildcards = ("0.0.0.0", "::")
    wanted = sorted({*DEFAULT_HOSTS, *(h for h in hosts if h and h not in wildcards)})
    tls = LocalTls(
        ca_file=folder / "ca.pem",
        bundle_file=_bundle_name(folder, base),
        cert_file=folder / "server.pem",
        key_file=folder / "server-key.pem",
        client_cert_file=folder / "client.pem",
        client_key_file=folder / "client-key.pem",
    )
    with _locked(folder / ".lock"):
        ca_key_file = folder / "ca-key.pem"
        if not _valid(tls.ca_file, ()) or not ca_key_file.exists():
            _make_ca(tls.ca_file, ca_key_file)
            tls.cert_file.unlink(missing_ok=True)
            tls.client_cert_file.unlink(missing_ok=True)
        if not _valid(tls.cert_file, wanted):
            _issue(tls, ca_key_file, tls.cert_file, tls.key_file, wanted)
        if not _valid(tls.client_cert_file, ()):
            _issue(tls, ca_key_file, tls.client_cert_file, tls.client_key_file, [])
        authority = tls.ca_file.read_text(encoding="ascii")
        trusted = base.read_text(encoding="utf-8", errors="replace")
        if authority.strip() in trusted:
            return replace(tls, bundle_file=base)
        bundle = trusted.rstrip("\n") + "\n" + authority
        if not tls.bundle_file.exists() or tls.bundle_file.read_text(encoding="utf-8") != bundle:
            _write(tls.bundle_file, bundle.encode("utf-8"), private=False)
    return tls


def _bundle_name(folder: Path, base: Path) -> Path:
    """``ca-bundle.pem`` on certifi's authorities; one per other trust store (processes whose
    environments name different ones never rewrite each other's)."""
    if base == Path(certifi.where()):
        return folder / "ca-bundle.pem"
    digest = hashlib.sha256(str(base.resolve()).encode()).hexdigest()[:12]
    return folder / f"ca-bundle-{digest}.pem"


def _valid(cert_file: Path, hosts: Iterable[str]) -> bool:
    """Whether ``cert_file`` holds a certificate valid a while yet, naming every host."""
    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    except (OSError, ValueError):
        return False
    if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) < RENEW_BEFORE:
        return False
    named: set[str] = set()
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        named = {*san.get_values_for_type(x509.DNSName)}
        named |= {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    except x509.ExtensionNotFound:
        pass
    return all(_name(h) in named for h in hosts)


def _name(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def _write(path: Path, data: bytes, *, private: bool) -> None:
    """Write a file whole (a temporary file renamed into place), 0600 when ``private``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    temporary.replace(path)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _make_ca(ca_file: Path, key_file: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=365 * CA_YEARS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_file, _pem_key(key), private=True)
    _write(ca_file, cert.public_bytes(serialization.Encoding.PEM), private=False)


def _issue(
    tls: LocalTls, ca_key_file: Path, cert_file: Path, key_file: Path, hosts: list[str]
) -> None:
    """A certificate signed by the authority: a server's for ``hosts``, a client's without."""
    ca = x509.load_pem_x509_certificate(tls.ca_file.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_file.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
    subject = "localhost" if hosts else "funcstack local client"
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=365 * SERVER_YEARS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    _write(key_file, _pem_key(key), private=True)
    chain = cert.public_bytes(serialization.Encoding.PEM) + tls.ca_file.read_bytes()
    _write(cert_file, chain, private=False)
