"""Use cases: command/query handlers and the relay, written against ports (abstract classes)."""
