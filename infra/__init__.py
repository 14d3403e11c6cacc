"""The Contacts app's own adapter: the list of live contacts on Cosmos DB. Every other adapter
(unit of work, relay, publisher, settings) is cosmos-outbox's."""
