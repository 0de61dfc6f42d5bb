"""The channel between the controller and its brokers: one JSON object per line over TCP.

Why not Kafka's wire format: Kafka's brokers reach the controller on a listener of its own
(``controller.listener.names``), which no client and no proxy ever sees, with APIs whose
schemas are not among the client ones the codec is generated from (BrokerRegistration,
BrokerHeartbeat, AlterPartition, AllocateProducerIds, and the metadata log itself). What
crosses this channel keeps Kafka's names and meaning (server/controller_server.py and
server/broker_lifecycle.py); the form is the simplest one both ends already have.

Requests carry ``op`` and ``id``; replies carry the same ``id``; the controller also pushes
``{"op": "metadata", "image": ...}`` (metadata_image.MetadataImage) whenever the image changes,
and once right after a broker registered.
"""

from __future__ import annotations

import json

import trio

#: The longest line either end accepts (a metadata image of a few thousand partitions).
MAX_LINE = 64 << 20


class ChannelClosed(Exception):
    """The other end went away (or sent something that is not a line of JSON)."""


class LineChannel:
    def __init__(self, stream: trio.abc.Stream):
        self.stream = stream
        self._buf = bytearray()
        self._send_lock = trio.Lock()

    async def send(self, message: dict) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        async with self._send_lock:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise ChannelClosed(str(exc)) from None

    async def receive(self) -> dict:
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                try:
                    return json.loads(line)
                except ValueError as exc:
                    raise ChannelClosed(f"not a line of JSON: {exc}") from None
            if len(self._buf) > MAX_LINE:
                raise ChannelClosed(f"a line longer than {MAX_LINE} bytes")
            try:
                data = await self.stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise ChannelClosed(str(exc)) from None
            if not data:
                raise ChannelClosed("closed by the other end")
            self._buf += data

    async def aclose(self) -> None:
        with trio.CancelScope(shield=True):
            await self.stream.aclose()


def parse_voters(text: str) -> list[tuple[int, str, int]]:
    """``controller.quorum.voters`` (``ID@HOST:PORT,...``) as (id, host, port)."""
    out = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        node, _, hostport = item.partition("@")
        host, _, port = hostport.rpartition(":")
        if not node.isdigit() or not host or not port.isdigit():
            raise ValueError(f"controller.quorum.voters: {item!r} is not ID@HOST:PORT")
        out.append((int(node), host, int(port)))
    return out
