"""Adapters: the Cosmos DB unit of work and quarantine, the Service Bus publisher, settings.
Imports application and domain; neither imports infra."""
