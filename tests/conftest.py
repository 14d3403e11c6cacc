"""Settings of every test under tests/ (the Contacts app's, the subscriber's, the deploy
templates', the tooling's, the repository's)."""

from __future__ import annotations

from hypothesis import settings

# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs an example may wait for a core (speed lives in `make bench`).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
