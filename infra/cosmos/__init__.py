"""Cosmos DB adapters."""
