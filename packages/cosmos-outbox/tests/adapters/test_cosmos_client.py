"""The Cosmos DB clients honour what the environment configures for the SDKs' HTTP transports
(proxies, a .netrc, requests' CA bundles); without any, they do not look for it again on every
request (test_azure_adapters.py measures the `aio` client's requests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cosmos_outbox.cosmos._client import environment_settings


@pytest.fixture
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """An environment with none of the settings, and a home without a .netrc."""
    for name in list(os.environ):
        if name.upper().endswith("_PROXY") or name.upper() in {
            "NETRC",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
        }:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def test_without_settings_neither_transport_reads_the_environment(bare: pytest.MonkeyPatch) -> None:
    assert not environment_settings(requests=True)
    assert not environment_settings(requests=False)


@pytest.mark.parametrize("name", ["HTTPS_PROXY", "https_proxy", "NO_PROXY", "ALL_PROXY", "NETRC"])
def test_a_proxy_or_netrc_setting_is_honoured_by_both(bare: pytest.MonkeyPatch, name: str) -> None:
    bare.setenv(name, "x")
    assert environment_settings(requests=True)
    assert environment_settings(requests=False)


def test_a_netrc_file_is_honoured_by_both(bare: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".netrc").write_text("machine example.com login a password b\n")
    assert environment_settings(requests=True)
    assert environment_settings(requests=False)


@pytest.mark.parametrize("name", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_a_ca_bundle_is_the_sync_transports_alone(bare: pytest.MonkeyPatch, name: str) -> None:
    bare.setenv(name, "/etc/ssl/certs/ca-certificates.crt")
    assert environment_settings(requests=True)
    assert not environment_settings(requests=False)
