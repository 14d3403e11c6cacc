"""A missing database or container, named (aio): see ``cosmos_changefeed._resources``."""

from __future__ import annotations

from typing import Any

from azure.cosmos.aio import ContainerProxy, DatabaseProxy
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from cosmos_changefeed._resources import MissingResourceError, Role, names


async def read_properties(container: ContainerProxy, role: Role) -> dict[str, Any]:
    """The container's properties (``read()``), or ``MissingResourceError`` naming it."""
    try:
        return dict(await container.read())
    except CosmosResourceNotFoundError:
        name, database, account = names(container)
        try:
            await DatabaseProxy(container.client_connection, database).read()
        except CosmosResourceNotFoundError:
            missing = True
        else:
            missing = False
        raise MissingResourceError(
            role, container=name, database=database, account=account, database_missing=missing
        ) from None
