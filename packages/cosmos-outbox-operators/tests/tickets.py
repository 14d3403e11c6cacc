"""The tickets app of these tests: `cosmos_outbox_testing.example`, one app for the tests of
every package of the repository (kept as this module so the tests' `from tickets import ...`
reads as before)."""

from cosmos_outbox_testing.example import *  # noqa: F403
