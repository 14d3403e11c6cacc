"""The Functions blueprints the core serves, each registered à la carte: the relay's
(`relay_functions`: the change-feed relay, the backlog timer, the scheduled events' releases)
and the docs' (`docs`: health, openapi.json, the 404/405 fallback). The operators' routes and
console are cosmos-outbox-operators'."""
