"""AMQP 1.0 channels at the frame level (local only): frames on a channel that has no session.

The service's AMQP stack (Microsoft.Azure.Amqp, AmqpConnection.OnReceiveSessionFrame) ignores a
``detach`` or an ``end`` on such a channel (a session that has ended, e.g. a late detach of an
async client) and closes the connection with ``amqp:not-found`` on any other frame there. The
frames are built with the endpoint's own codec (``_amqp``, on Apache Qpid Proton's).
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from funcstack.deadlines import LOOPBACK
from funcstack.servicebus._amqp import decode_frame_body, frame, performative, uint, ushort

from .conftest import Target

pytestmark = [pytest.mark.integration, pytest.mark.conformance]

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
OPEN, BEGIN, ATTACH, DETACH, END, CLOSE = 0x10, 0x11, 0x12, 0x16, 0x17, 0x18


class Peer:
    """A bare AMQP client: one frame out, frames in, nothing else."""

    def __init__(self, port: int) -> None:
        # each frame a local answer: LOOPBACK for each read
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=LOOPBACK)
        self.sock.sendall(AMQP_HEADER)
        assert self._exactly(8) == AMQP_HEADER

    def send(self, channel: int, body: Any) -> None:
        self.sock.sendall(frame(channel, body))

    def receive(self) -> tuple[int, int, list[Any]]:
        """(channel, performative code, fields) of the next frame that is not a heartbeat."""
        while True:
            head = self._exactly(8)
            size, doff, channel = int.from_bytes(head[:4], "big"), head[4], head[6:8]
            body = memoryview(self._exactly(size - 8))[doff * 4 - 8 :]
            if len(body):
                code, fields, _ = decode_frame_body(body)
                return int.from_bytes(channel, "big"), code, fields

    def closed_by_peer(self) -> bool:
        """Whether the endpoint closes the connection (within a read's LOOPBACK)."""
        try:
            return self.sock.recv(1) == b""
        except TimeoutError:  # still open: not closed
            return False
        except OSError:  # reset
            return True

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the endpoint")
            data += chunk
        return data


def _open() -> Any:
    return performative(OPEN, "test", None, uint(65536), ushort(255))


def _begin() -> Any:
    return performative(BEGIN, None, uint(0), uint(100), uint(100))


def _attach(handle: int) -> Any:
    return performative(ATTACH, "late", uint(handle), True)


def _opened_peer(target: Target) -> Peer:
    assert target.endpoint is not None
    peer = Peer(target.endpoint.port)
    peer.send(0, _open())
    assert peer.receive()[1] == OPEN
    return peer


def test_a_detach_or_end_on_an_ended_session_is_ignored_and_the_connection_kept(
    local_only: Target,
) -> None:
    peer = _opened_peer(local_only)
    peer.send(3, _begin())
    assert peer.receive()[:2] == (3, BEGIN)
    peer.send(3, performative(END))
    assert peer.receive()[:2] == (3, END)

    peer.send(3, performative(DETACH, uint(0), True))  # after the end
    peer.send(3, performative(END))  # a second end
    peer.send(4, _begin())  # the connection still serves new sessions
    assert peer.receive()[:2] == (4, BEGIN)  # and nothing came back for the ignored frames
    peer.sock.close()


def test_another_frame_on_a_channel_without_a_session_closes_the_connection_not_found(
    local_only: Target,
) -> None:
    peer = _opened_peer(local_only)
    peer.send(7, _attach(0))
    channel, code, fields = peer.receive()
    assert (channel, code) == (0, CLOSE)
    condition = fields[0].value[0]
    assert condition == "amqp:not-found"
    assert peer.closed_by_peer()
