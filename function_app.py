"""Azure Functions entrypoint (v2 programming model): the Contacts app.

- the contact API (`entrypoints.contacts`): each operation declared once, on cosmos-outbox's
  route helper;
- the outbox (cosmos-outbox): the change-feed relay, the backlog timer and the operators'
  routes;
- the docs: health, openapi.json and the 404/405 fallback, read from the indexed functions.

No I/O at import: `entrypoints.bootstrap` builds the dependencies lazily, on first use. The
outbox blueprint reads its trigger settings (poll delay, batch size, backlog schedule) from the
app settings at indexing, and fails indexing naming a bad one.
"""

from __future__ import annotations

from entrypoints.bootstrap import bootstrap

app = bootstrap()
