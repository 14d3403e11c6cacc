"""Cosmos DB adapters of the Contacts app."""
