"""A lazy Azurite's free ports chosen again when one was taken before it was bound (a fresh
clone's `make test` lost a module's stack to that race: EADDRINUSE)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from funcstack import services
from funcstack.services import start_azurite


def test_a_chosen_port_taken_before_it_is_bound_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    real = services.free_port

    def first_the_taken_one() -> Iterator[int]:
        yield taken.getsockname()[1]
        while True:
            yield real()

    ports = first_the_taken_one()
    monkeypatch.setattr(services, "free_port", lambda: next(ports))
    try:
        azurite = start_azurite(tmp_path / "data", tmp_path / "azurite.log", lazy=True)
        try:
            assert taken.getsockname()[1] not in azurite.ports
        finally:
            azurite.stop()
    finally:
        taken.close()
