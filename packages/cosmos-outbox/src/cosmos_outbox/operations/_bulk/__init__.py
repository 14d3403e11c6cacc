"""The bulk operations' machinery (DESIGN §19), in a folder of its own: an operators' action on
many items kept as one stored document any relay host resumes.

- `_kinds`: each kind said once (`BULK_KINDS`, a `KindSpec` each), read by all below;
- `_operation`: an operation as the ways in render it (`Operation`, `OperationList`) and its
  store (`OperationStore`, in the outbox's container; `cosmos_outbox.documents` names it);
- `_operators`: the use cases `Operations` gives (`BulkOperators`: start, read, list, cancel);
- `_items`, `_redrive_items`: what an operation acts on, behind one port (`Items`): dead
  letters, failure records, quarantined events, stored events re-driven;
- `_worker`: the worker whoever runs the relay ticks (`OperationWorker`).

Nothing is imported here: each importer names the module it needs (as the rest of `operations`
does), so that `import cosmos_outbox.documents` does not import the use cases."""
