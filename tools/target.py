"""The Contacts app as the HTTP contract and relay suites reach it (their `target` fixture): the
local stack the tests start (`tools.stack.Stack`), or, with `pytest --deployed`, an app that
is already running -- the one the deployed smoke test deployed with deploy/main.bicep, or `make
run`'s -- named by environment variables that carry the deployment's output names
(`az deployment group show ... --query properties.outputs`; VARIABLES).

A deployed app's Cosmos DB account and Service Bus namespace take no key (the deployment turns
local auth off): the suites reach them with an Entra ID identity, azure-identity's
`DefaultAzureCredential` (in the workflow, its own identity, signed in with OpenID Connect, to
which the deployment gives the data roles: `principalId`). They use data-plane rights only
(read and write items, query, receive), what Cosmos DB's built-in data contributor and Service
Bus' data receiver give. Endpoints on the loopback (funcstack's: `make run`'s stack) are
reached the same way with a token the local endpoints do not check -- they check its kind:
funcstack's Cosmos DB endpoint refuses a control-plane request to an Entra ID token, as Azure's
data-plane roles do -- and Service Bus there without TLS, as the SDK reaches the development
emulator.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from tools.httpclient import Client
from tools.receive import Namespace, Received, drain

if TYPE_CHECKING:
    from azure.core.credentials import AccessToken, TokenCredential
    from azure.cosmos import ContainerProxy
    from azure.servicebus import ServiceBusClient

    from tools.stack import Stack

__all__ = [
    "KEY_VARIABLE",
    "LOCAL_FIXTURES",
    "TARGET_FIXTURES",
    "VARIABLES",
    "Deployed",
    "DeployedError",
    "LocalTarget",
    "LocalToken",
    "Target",
    "deployed_selection",
    "receive",
]

#: The deployment's outputs the suites need (deploy/main.bicep's names), each an environment
#: variable of the same name in `--deployed` mode.
VARIABLES = (
    "AZURE_FUNCTION_APP_URL",
    "COSMOS_ENDPOINT",
    "COSMOS_DATABASE",
    "COSMOS_CONTAINER",
    "SERVICEBUS_FULLY_QUALIFIED_NAMESPACE",
    "SERVICEBUS_TOPIC",
    "SERVICEBUS_SUBSCRIPTION",
)
#: A key every route the suites call takes, sent as `x-functions-key`: the host's master key
#: (`az functionapp keys list`: the operators' routes are admin-level, the contacts' routes take
#: it too). Unset: no key is sent (a local host that checks none).
KEY_VARIABLE = "AZURE_FUNCTION_APP_KEY"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "::ffff:127.0.0.1"}
#: The fixtures that give a test the target (tests/conftest.py: target and client;
#: tests/contacts/outbox/conftest.py: relay_target).
TARGET_FIXTURES = frozenset({"target", "relay_target"})
#: The fixtures only the local stack has: a test that asks for one cannot run `--deployed`.
LOCAL_FIXTURES = frozenset({"stack", "shared_stack"})


class DeployedError(Exception):
    """A deployed target that cannot be used, in one line naming what is missing."""


class Target(Protocol):
    """What the suites use of the app they test: its API and where its events go."""

    @property
    def api_url(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]:
        """What every request to the API carries (a deployed app's key)."""
        ...

    @property
    def namespace(self) -> Namespace: ...

    @property
    def topic(self) -> str: ...

    @property
    def subscription(self) -> str: ...

    def client(self, *, timeout: float = 30.0) -> Client: ...

    def contacts_container(self) -> ContainerProxy: ...


@dataclass(frozen=True)
class LocalTarget:
    """The local stack the tests started (its API needs no key; keys for the rest)."""

    stack: Stack
    #: the subscription in sessions that receives every event (tools/servicebus-config.json)
    subscription: str = "all-events"

    @property
    def api_url(self) -> str:
        return self.stack.api_url

    @property
    def headers(self) -> dict[str, str]:
        return {}

    @property
    def namespace(self) -> Namespace:
        assert self.stack.servicebus is not None
        return self.stack.servicebus.connection_string

    @property
    def topic(self) -> str:
        return self.stack.settings()["SERVICEBUS_TOPIC"]

    def client(self, *, timeout: float = 30.0) -> Client:
        return Client(self.api_url, timeout=timeout)

    def contacts_container(self) -> ContainerProxy:
        return self.stack.contacts_container()


@dataclass(frozen=True)
class Deployed:
    """An app already running, named by VARIABLES (and KEY_VARIABLE)."""

    app_url: str
    cosmos_endpoint: str
    database: str
    container: str
    fully_qualified_namespace: str
    topic: str
    subscription: str
    key: str | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Deployed:
        missing = [name for name in VARIABLES if not environ.get(name, "").strip()]
        if missing:
            raise DeployedError(
                f"--deployed: set {', '.join(missing)} (the deployment's outputs of the same "
                "names: docs/testing.md, The deployed smoke test)"
            )
        value = {name: environ[name].strip() for name in VARIABLES}
        return cls(
            app_url=value["AZURE_FUNCTION_APP_URL"],
            cosmos_endpoint=value["COSMOS_ENDPOINT"],
            database=value["COSMOS_DATABASE"],
            container=value["COSMOS_CONTAINER"],
            fully_qualified_namespace=value["SERVICEBUS_FULLY_QUALIFIED_NAMESPACE"],
            topic=value["SERVICEBUS_TOPIC"],
            subscription=value["SERVICEBUS_SUBSCRIPTION"],
            key=environ.get(KEY_VARIABLE, "").strip() or None,
        )

    @property
    def api_url(self) -> str:
        return self.app_url.rstrip("/") + "/api"

    @property
    def headers(self) -> dict[str, str]:
        return {} if self.key is None else {"x-functions-key": self.key}

    def client(self, *, timeout: float = 30.0) -> Client:
        return Client(self.api_url, timeout=timeout, headers=self.headers)

    @cached_property
    def credential(self) -> TokenCredential:
        """DefaultAzureCredential; a local token when every endpoint is on the loopback."""
        hosts = {urlsplit(self.cosmos_endpoint).hostname, self._namespace_host}
        if hosts <= LOOPBACK:
            return LocalToken()
        from azure.identity import DefaultAzureCredential

        return DefaultAzureCredential()

    def contacts_container(self) -> ContainerProxy:
        from azure.cosmos import CosmosClient

        client = CosmosClient(self.cosmos_endpoint, credential=self.credential)
        return client.get_database_client(self.database).get_container_client(self.container)

    @property
    def namespace(self) -> Namespace:
        return self._servicebus

    def _servicebus(self, **options: Any) -> ServiceBusClient:
        from azure.servicebus import ServiceBusClient

        local = self._namespace_host in LOOPBACK
        return ServiceBusClient(
            self.fully_qualified_namespace, self.credential, use_tls=not local, **options
        )

    @property
    def _namespace_host(self) -> str | None:
        return urlsplit(f"//{self.fully_qualified_namespace}").hostname


class LocalToken:
    """A token credential (azure-core's protocol) for funcstack's endpoints, which do not check
    a token's signature: the SDKs send it as they send an Entra ID token."""

    def get_token(self, *_scopes: str, **_options: Any) -> AccessToken:
        from azure.core.credentials import AccessToken

        expires = datetime.now(UTC) + timedelta(hours=1)
        return AccessToken("funcstack-local-token", int(expires.timestamp()))


class _Item(Protocol):
    """What the selection reads of a pytest item."""

    @property
    def nodeid(self) -> str: ...

    def get_closest_marker(self, name: str) -> Any: ...


def deployed_selection[I: _Item](items: Sequence[I]) -> tuple[list[I], list[I], list[str]]:
    """`--deployed`'s choice among collected tests: (kept, deselected, unsorted). Kept: those
    that use the target (TARGET_FIXTURES) and are not marked `local_stack`; deselected: the
    rest. Unsorted, which --deployed refuses: a test that starts servers (marked integration or
    e2e) that neither uses the target nor is marked local_stack, and a kept test that also asks
    for a fixture only the local stack has -- so that what a deployed run leaves out is always
    a marked, stated choice."""
    kept, deselected, unsorted = [], [], []
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        local = item.get_closest_marker("local_stack") is not None
        if names & TARGET_FIXTURES and not local:
            if names & LOCAL_FIXTURES:
                asked = ", ".join(sorted(names & LOCAL_FIXTURES))
                unsorted.append(f"{item.nodeid} (it asks for {asked})")
            kept.append(item)
            continue
        servers = item.get_closest_marker("integration") or item.get_closest_marker("e2e")
        if servers is not None and not local:
            unsorted.append(item.nodeid)
        deselected.append(item)
    return kept, deselected, unsorted


def receive(
    target: Target,
    *,
    until: Callable[[list[Received]], bool],
    timeout: float,
    sessions: Collection[str] | None = None,
) -> list[Received]:
    """Receive (and complete) the target's events from its subscription: every session's, or
    `sessions`' (a test's own contacts', on a deployed app that others' events reach too)."""
    return drain(
        target.namespace,
        until=until,
        timeout=timeout,
        topic=target.topic,
        subscription=target.subscription,
        sessions=sessions,
    )
