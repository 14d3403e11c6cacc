"""Concerts: tickets sold over HTTP (FastAPI) and refunded by commands (a Service Bus queue),
each change and its events written in one Cosmos DB transactional batch."""
