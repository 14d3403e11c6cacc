"""A missing database or container, named: the SDK says only ``CosmosResourceNotFoundError:
(NotFound) NotFound`` when a container's properties are read and it (or its database) does not
exist. A processor and an estimator read both containers' properties when they start, before
any lease is taken, so a missing one fails the start with ``MissingResourceError``: which role
(the monitored container, the lease container, or the database of one), its name, the
database, the account, and the fix. The wording is here, once; the sync reads are here and the
aio ones in ``aio/_resources_async``."""

from __future__ import annotations

from typing import Any, Literal

from azure.cosmos import ContainerProxy, DatabaseProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from cosmos_changefeed._names import account_host

#: The container a processor reads, and the one its leases are in.
Role = Literal["monitored container", "lease container"]

#: What creates a lease container as the processor wants it (partitioned on /id, TTL on).
LEASE_CONTAINER_FIX = (
    'database.create_container_if_not_exists("{name}", partition_key=PartitionKey("/id"), '
    "default_ttl=-1)"
)


class MissingResourceError(LookupError):
    """A database or container the processor (or the estimator) needs does not exist."""

    def __init__(
        self, role: Role, *, container: str, database: str, account: str, database_missing: bool
    ) -> None:
        self.role: Role = role
        self.container = container
        self.database = database
        self.account = account
        self.database_missing = database_missing
        super().__init__(missing_text(role, container, database, account, database_missing))


def missing_text(
    role: Role, container: str, database: str, account: str, database_missing: bool
) -> str:
    """What is missing, and what to do."""
    if database_missing:
        return (
            f"the database '{database}' of the {role} '{container}' does not exist on account "
            f'{account}: create it (client.create_database_if_not_exists("{database}")), or '
            "correct the database's name"
        )
    if role == "lease container":
        fix = LEASE_CONTAINER_FIX.format(name=container)
        return (
            f"the lease container '{container}' does not exist in database '{database}' on "
            f"account {account}: create it ({fix}), or correct its name"
        )
    return (
        f"the monitored container '{container}' does not exist in database '{database}' on "
        f"account {account}: create it, or correct its name (the container whose changes "
        "the processor reads)"
    )


def names(container: Any) -> tuple[str, str, str]:
    """(container, database, account host) of an azure-cosmos container (sync or aio)."""
    link = str(getattr(container, "container_link", ""))
    parts = link.split("/")
    database = parts[1] if len(parts) > 1 else "?"
    connection = getattr(container, "client_connection", None)
    account = account_host(str(getattr(connection, "url_connection", "") or "?"))
    return str(getattr(container, "id", "?")), database, account


def read_properties(container: ContainerProxy, role: Role) -> dict[str, Any]:
    """The container's properties (``read()``), or ``MissingResourceError`` naming it."""
    try:
        return dict(container.read())
    except CosmosResourceNotFoundError:
        name, database, account = names(container)
        try:
            DatabaseProxy(container.client_connection, database).read()
        except CosmosResourceNotFoundError:
            missing = True
        else:
            missing = False
        raise MissingResourceError(
            role, container=name, database=database, account=account, database_missing=missing
        ) from None
