"""`free_port`: a port a server binds a moment later, taken below the kernel's ephemeral range so
that an outgoing connection's local port cannot take it in between (tests that choose their
ports run beside others that connect)."""

from __future__ import annotations

import socket

from funcstack.services import _ephemeral_ports, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_bound() -> None:
    low, _ = _ephemeral_ports()
    ports = {free_port() for _ in range(20)}
    assert all(10100 <= port < low for port in ports), ports
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_not_given() -> None:
    taken = []
    try:
        for _ in range(50):
            s = socket.socket()
            s.bind(("127.0.0.1", free_port()))
            s.listen()
            taken.append(s)
        assert len({s.getsockname()[1] for s in taken}) == 50
    finally:
        for s in taken:
            s.close()
