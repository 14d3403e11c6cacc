"""The SQL texts that read stored event documents (and the quarantine records beside them): the
fields they name are the forms' own, so they are written here, beside the forms, and nowhere else
(tests/repository/test_layering.py reads every other module's SQL for a stored field's name)."""

from __future__ import annotations

#: The due times of the scheduled events not released and not cancelled, across partitions
#: (`@type`: the event documents' type, `EVENT_TYPE`).
SCHEDULED_WAITING = (
    "SELECT VALUE c.deliverAt FROM c WHERE c.type = @type AND IS_DEFINED(c.deliverAt) "
    "AND NOT IS_DEFINED(c.releasedAt) AND NOT IS_DEFINED(c.cancelledAt)"
)
#: The partitions where documents name an aggregate (`@id`): its events, and its quarantine
#: records since 0.5, across partitions, on the indexed `aggregateId`.
AGGREGATE_PARTITIONS = "SELECT VALUE c.partitionKey FROM c WHERE c.aggregateId = @id"
