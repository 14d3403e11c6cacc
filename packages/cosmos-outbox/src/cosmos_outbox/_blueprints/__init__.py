"""The Functions blueprints the package serves, each registered à la carte: the relay's
(`relay`: the change-feed relay and the backlog timer), the operators' (`operators`: their
routes and models) and the docs' (`docs`: health, openapi.json, the 404/405 fallback)."""
