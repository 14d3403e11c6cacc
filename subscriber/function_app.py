"""The subscriber app: contact events from its own session-enabled subscription into a
projection (contacts_projection), and the projection read over HTTP (`GET
/api/projections/contacts/{id}` and a paged list; a function key in Azure, none locally).
The functions and their bindings are declared by the composition root
(`contacts_projection.bootstrap`); the projection is in `contacts_projection`, the inbox,
ordering and tolerant dispatch are cosmos-outbox's (its async API, `cosmos_outbox.aio`: the
functions are `async def` ones on the worker's event loop, over the SDKs' `aio` clients). No
I/O at import.

One session = one contact: the host hands a contact's events over one at a time, in order.
Success completes the message; an exception abandons it (redelivered, then dead-lettered after
the subscription's MaxDeliveryCount). Only a message that is not an outbox event at all fails:
an action this subscriber does not handle, or an event of another aggregate type (its
subscription filters on `aggregateType`, so one arrives only if that filter is missing), is
recorded and acknowledged, so a new event type never stalls a contact's session.
"""

from __future__ import annotations

from contacts_projection.bootstrap import bootstrap

app = bootstrap()
