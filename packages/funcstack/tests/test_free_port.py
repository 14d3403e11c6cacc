"""`free_port`: a port a server binds a moment later, taken below the kernel's ephemeral range so
that an outgoing connection's local port cannot take it in between (tests that choose their
ports run beside others that connect)."""

from __future__ import annotations

import socket
from pathlib import Path

from funcstack.services import LocalServices, _ephemeral_ports, free_port

HELLO = Path(__file__).parent / "apps" / "hello"


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


def test_the_parts_that_restart_on_their_port_start_below_the_ephemeral_range(
    tmp_path: Path,
) -> None:
    """A Cosmos DB endpoint, a Service Bus endpoint and a host asked for port 0 start on a port
    below the ephemeral range, and start again on it after a stop. Bound by the kernel's choice,
    the port was in that range: a restart of the subscriber's host once found it taken by an
    outgoing connection (`[Errno 98] address already in use`, a fresh-clone run)."""
    low, _ = _ephemeral_ports()
    services = LocalServices(workdir=tmp_path)
    try:
        first = {
            "cosmos": services.run_cosmos().port,
            "servicebus": services.run_servicebus().port,
            "hello": services.run_host("hello", HELLO, settings={}).port,
        }
        assert all(10100 <= port < low for port in first.values()), first
        for name in first:
            services.stop_part(name)
        again = {
            "cosmos": services.run_cosmos().port,
            "servicebus": services.run_servicebus().port,
            "hello": services.run_host("hello", HELLO, settings={}).port,
        }
        assert again == first
    finally:
        services.stop()
