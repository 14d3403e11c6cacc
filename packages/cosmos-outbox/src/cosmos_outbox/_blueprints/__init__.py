"""The Functions blueprints the package serves: the outbox's (`outbox`: relay, backlog timer,
the operators' routes, with their models in `operators`) and the docs' (`docs`: health,
openapi.json, the 404/405 fallback)."""
