"""The operators' routes and /health alone as a Functions app on the `aio` outbox (its
container and topic from the app settings; no relay, no routes of its own), for the package's
tests that need them in a local Functions host over the SDKs' `aio` clients
(operators/test_operators_bounded.py, through funcstack's `funcstack_app`)."""

from __future__ import annotations

from cosmos_outbox.aio import Outbox
from cosmos_outbox_operators import Operators

outbox = Outbox()
app = outbox.function_app(Operators(), title="Operators", relay=False)
