"""Loaded by every sample process of a conformance run (this folder is on its PYTHONPATH).

The AMQP transport of azure-servicebus verifies the server against ``certifi.where()`` only,
not ``SSL_CERT_FILE``: point it at the run's bundle, which also holds the local CA. This is a
trust-store setting (the same step as importing the official emulator's certificate), done
without touching the samples; ``conformance/plugin.py`` does the same for the SDKs' tests.
"""

from __future__ import annotations

import os

import certifi


def _where(bundle: str) -> str:
    return bundle


_bundle = os.environ.get("CONFORMANCE_CA_BUNDLE")
if _bundle:
    certifi.where = lambda: _where(str(_bundle))
