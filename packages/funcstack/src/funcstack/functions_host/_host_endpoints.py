"""The host's own endpoints, served beside the app's functions as the Azure Functions host serves
them: the landing page, the health ping and the host's status.

Follows Azure/azure-functions-host (``src/WebJobs.Script.WebHost``):

* ``GET /`` (``Middleware/HomepageMiddleware.cs``): when no function took the request and its
  path is ``/``, whatever the method, **200** ``text/html``, the page that says the app is up
  and running; with the app setting ``AzureWebJobsDisableHomepage`` = ``true`` (any case; read
  at each request, as ``ScriptSettingsManager`` reads it) **204** with no body. A function whose
  route takes ``/`` (``routePrefix: ""`` and a catch-all, an ASGI app) keeps it. The page is
  funcstack's own, short one (the host's is an embedded resource of its assembly), with the
  same title.
* ``GET|POST /admin/host/ping`` (``Controllers/HostController.Ping``): **200** with no body,
  ``Cache-Control: no-store,no-cache`` and ``Pragma: no-cache`` (``[ResponseCache(NoStore =
  true, Location = None)]``); anonymous: no key is ever asked (health probes use it).
* ``GET /admin/host/status`` (``HostController.GetHostStatus``, ``Models/HostStatus.cs``):
  the host's status as JSON, ``id``, ``state``, ``version``, ``versionDetails``,
  ``platformVersion``, ``instanceId``, ``computerName``, ``processUptime`` (ms),
  ``functionAppContentEditingState``; admin level (``AdminAuthLevelOrInternal``): with keys
  enforced, only the master key, else 401 with no body, as for an ``admin`` function.
* The admin routes are outside ``routePrefix``, matched before the functions' routes and
  case-insensitively, with or without a trailing ``/`` (ASP.NET Core routing); another method
  is **405** with an ``Allow`` header (endpoint routing's ``HttpMethodMatcherPolicy``).

``id`` is the host id the host derives when it runs outside Azure
(``ScriptHostIdProvider.GetDefaultHostId``): the machine name's letters and digits, ``-``, the
absolute value of the script root's ``Utility.GetStableHash``, cut to 32 characters,
lower-cased, trailing ``-`` trimmed; the app setting ``AzureFunctionsWebHost__hostid`` wins, as
in Azure. ``instanceId`` is ``WEBSITE_INSTANCE_ID`` (an instance's name under ``--instances``),
``platformVersion`` and ``computerName`` are empty, as outside App Service, and
``functionAppContentEditingState`` is ``Unknown`` as on every SKU but Linux Consumption.
LOCAL DIFFERENCE: ``version`` is funcstack's, ``versionDetails`` says what runs (the host's
are its assembly's); no ``extensionBundle`` (no bundle is downloaded; the host leaves the key
out when it has none).
"""

from __future__ import annotations

import json
import os
import socket
import time
from importlib import metadata
from pathlib import Path

from aiohttp import web

from funcstack.functions_host._keys import HostKeys

__all__ = ["DISABLE_HOMEPAGE_SETTING", "HOST_ID_SETTING", "HostEndpoints", "default_host_id"]

#: The app setting that turns the landing page off (``EnvironmentSettingNames``).
DISABLE_HOMEPAGE_SETTING = "AzureWebJobsDisableHomepage"
#: The app setting that names the host id (configuration ``AzureFunctionsWebHost:hostid``).
HOST_ID_SETTING = "AzureFunctionsWebHost__hostid"
#: ``ScriptConstants.MaximumHostIdLength``.
MAX_HOST_ID_LENGTH = 32

_TITLE = "Your Azure Function App is up and running."
_HOMEPAGE = f"""<!DOCTYPE html>
<html>
<head><meta charset="utf-8"><title>{_TITLE}</title></head>
<body>
<h1>{_TITLE}</h1>
<p>Served by funcstack's local Functions host. Set the app setting
{DISABLE_HOMEPAGE_SETTING}=true to answer 204 here instead.</p>
</body>
</html>
"""
_NO_STORE = {"Cache-Control": "no-store,no-cache", "Pragma": "no-cache"}
#: The admin routes and the methods each takes.
_ROUTES = {"admin/host/ping": ("GET", "POST"), "admin/host/status": ("GET",)}


def stable_hash(value: str) -> int:
    """``Utility.GetStableHash``: ``hash = hash * 31 + c`` from 23 over the UTF-16 code units,
    in 32-bit integers that wrap."""
    data = value.encode("utf-16-le", "surrogatepass")
    result = 23
    for i in range(0, len(data), 2):
        result = (result * 31 + int.from_bytes(data[i : i + 2], "little")) & 0xFFFFFFFF
    return result - (1 << 32) if result & 0x80000000 else result


def default_host_id(script_root: Path, machine: str | None = None) -> str:
    """The host id outside Azure (``ScriptHostIdProvider.GetDefaultHostId``)."""
    name = (machine if machine is not None else socket.gethostname()).split(".", 1)[0]
    sanitized = "".join(ch for ch in name if ch.isalnum())
    host_id = f"{sanitized}-{abs(stable_hash(str(script_root)))}"
    return host_id[:MAX_HOST_ID_LENGTH].lower().rstrip("-")


def _process_uptime_ms() -> int:
    """Milliseconds since this process started (``/proc/self/stat``), as the host reports
    ``Process.GetCurrentProcess().StartTime`` against now."""
    try:
        stat = Path("/proc/self/stat").read_text()
        started_ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0, int((uptime - started_ticks / os.sysconf("SC_CLK_TCK")) * 1000))
    except (OSError, ValueError, IndexError):
        return int((time.monotonic() - _IMPORTED) * 1000)


_IMPORTED = time.monotonic()


def _version(distribution: str) -> str:
    """An installed distribution's version (funcstack's own, read as any other: this module
    does not import the package it is part of)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:  # pragma: no cover - installed with funcstack
        return "unknown"


class HostEndpoints:
    """The landing page and the ``admin/host`` routes of one host (``keys``: the host's keys
    when enforced, else None: nothing is checked, as with ``func start``)."""

    def __init__(self, *, script_root: Path, keys: HostKeys | None = None) -> None:
        self._script_root = script_root
        self._keys = keys

    def answer(self, request: web.BaseRequest, path: str) -> web.Response | None:
        """The answer of an admin route for ``path`` (as Kestrel decoded it), or None when the
        path is not one."""
        route = path.strip("/").lower()
        methods = _ROUTES.get(route)
        if methods is None:
            return None
        if request.method.upper() not in methods:
            return web.Response(status=405, headers={"Allow": ", ".join(methods)})
        if route == "admin/host/ping":
            return web.Response(status=200, headers=_NO_STORE)
        if self._keys is not None and not self._keys.authorizes("admin", request):
            return web.Response(status=401)  # the policy's challenge: no body
        return web.Response(
            status=200,
            body=json.dumps(self.status()).encode(),
            content_type="application/json",
            charset="utf-8",
        )

    def status(self) -> dict[str, object]:
        """``HostStatus`` as the host serialises it (null values left out)."""
        version = _version("funcstack")
        return {
            "id": os.environ.get(HOST_ID_SETTING) or default_host_id(self._script_root),
            "state": "Running",
            "version": version,
            "versionDetails": (
                f"funcstack {version}: a local Functions host on the Python worker "
                f"library azure-functions-runtime {_version('azure-functions-runtime')}"
            ),
            "platformVersion": "",
            "instanceId": os.environ.get("WEBSITE_INSTANCE_ID", ""),
            "computerName": "",
            "processUptime": _process_uptime_ms(),
            "functionAppContentEditingState": "Unknown",
        }

    @staticmethod
    def homepage() -> web.Response:
        """The answer to ``/`` when no function took it."""
        if os.environ.get(DISABLE_HOMEPAGE_SETTING, "").lower() == "true":
            return web.Response(status=204)
        return web.Response(
            status=200, body=_HOMEPAGE.encode(), headers={"Content-Type": "text/html"}
        )
