"""The Contacts app's Functions blueprints (the contact API, its operators' model aliases) and
its composition root (bootstrap)."""
