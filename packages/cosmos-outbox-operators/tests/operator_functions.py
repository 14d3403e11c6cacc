"""The functions the operators' blueprint registers, by name: declared once for the tests that
hold an app's indexed functions to them (http_api/test_a_la_carte.py, test_ticket_app.py,
operators/test_operators.py); a route added to the blueprint is added here."""

from __future__ import annotations

#: The operators' routes through the admin key's door (`outbox/...`).
KEYED = {
    "outbox_status",
    "backlog_history",
    "list_quarantine",
    "show_quarantined",
    "replay_quarantined",
    "discard_quarantined",
    "redrive_events",
    "preview_redrive",
    "redrive_events_operation",
    "count_dead_letters",
    "list_dead_letters",
    "peek_dead_letter",
    "resubmit_dead_letters",
    "discard_dead_letters",
    "preview_resubmit_dead_letters",
    "preview_discard_dead_letters",
    "event_journey",
    "show_failure",
    "list_failures",
    "retry_failure",
    "archive_failure",
    "unarchive_failure",
    "aggregate_journey",
    "aggregate_documents",
    "subscribers_status",
    "release_held",
    "list_groups",
    "preview_group",
    "act_on_group",
    "unarchive_group",
    "resubmit_dead_letters_operation",
    "discard_dead_letters_operation",
    "list_operations",
    "show_operation",
    "cancel_operation",
    "continue_operation",
}
#: The same operations through the signed-in operator's door (`outbox/console/...`).
SIGNED_IN = {f"console_{name}" for name in KEYED}
#: Anonymous (the host's ANONYMOUS level), no door: what a probe reads.
HEALTH = {"outbox_health"}
#: The console's page and its files.
PAGES = {"console_page", "console_static"}
OPERATORS = KEYED | SIGNED_IN | PAGES | HEALTH
RELAY = {"relay_events", "outbox_backlog", "outbox_operations"}
