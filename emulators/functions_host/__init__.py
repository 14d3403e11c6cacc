"""Local Azure Functions runner: HTTP triggers and the Cosmos DB trigger, without Core Tools."""

from __future__ import annotations

from emulators.functions_host.runner import Runner

__all__ = ["Runner"]
