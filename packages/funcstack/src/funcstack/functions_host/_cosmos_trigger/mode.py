"""A Cosmos DB trigger's ``changeFeedMode``, read when the host indexes the app: served, or
refused with the reason (see ``options``' docstring). Imports nothing of the host but its
settings' resolver, so the indexer (``_functions``) reads it without the trigger's other parts.
"""

from __future__ import annotations

from typing import Any

from funcstack.functions_host._config import resolve

#: ``changeFeedMode``'s values (``CosmosDBChangeFeedMode`` of azure-functions 2.3).
LATEST_VERSION = "LatestVersion"
ALL_VERSIONS_AND_DELETES = "AllVersionsAndDeletes"


def change_feed_mode_refusal(function: str, binding: dict[str, Any]) -> str | None:
    """Why the host refuses to index a Cosmos DB trigger's ``changeFeedMode`` (None: served).
    The mode's name is read as .NET reads an enum from JSON, ignoring case."""
    raw = resolve(binding.get("changeFeedMode"))
    if raw is None or str(raw).strip() == "" or str(raw).strip().lower() == "latestversion":
        return None
    mode = str(raw).strip()
    if mode.lower() == ALL_VERSIONS_AND_DELETES.lower():
        return (
            f"function {function}: the Cosmos DB trigger's change_feed_mode (changeFeedMode) "
            f"'{mode}' is not served by funcstack's Functions host: its trigger reads the "
            "latest version of each document only, and would miss every delete silently "
            "(funcstack's Cosmos DB endpoint serves the all-versions-and-deletes feed to the "
            "SDKs and to cosmos-changefeed's processor; Microsoft's 'Change feed modes' page "
            f"lists no Functions trigger support for it). Use '{LATEST_VERSION}' (the default) "
            "locally, or run this function against Azure Cosmos DB"
        )
    return (
        f"function {function}: the Cosmos DB trigger's change_feed_mode (changeFeedMode) "
        f"'{mode}' is not a change feed mode: '{LATEST_VERSION}' or "
        f"'{ALL_VERSIONS_AND_DELETES}'"
    )
