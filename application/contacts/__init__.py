"""The contact use cases: commands (request bodies), views (responses), the service, and the
one contact-specific port (the list of live contacts)."""
