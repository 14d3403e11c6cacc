from __future__ import annotations


def is_live() -> bool:
    """Always live: the local endpoints stand in for the service (no recordings)."""
    return True
