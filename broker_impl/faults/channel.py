"""The notice channel between a broker's fault points and the harness that armed them.

Why a channel and not the log: a harness that learns "the point fired" by re-reading log files
polls, re-reads bytes it has seen, and depends on a line's exact wording. Here every hit of an
armed point sends one small datagram (a JSON object) to the address the harness gave in
``kconform.fault.notify``, *before* the point acts: ``sendto`` on a loopback UDP socket returns
once the datagram sits in the receiver's buffer, so even a point that crashes the broker
(``os._exit``) or stops it (SIGSTOP) right after has been told. Loopback datagrams are not
lost unless the receiver's buffer overflows, and a case arms a handful of points.

Both ends live here so the format is written once: the broker sends with
:class:`NoticeSender`, the harness receives with :class:`FaultListener` (a thread, so the
harness's synchronous runner can wait on it with a timeout). Nothing here imports the rest of
the broker.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import asdict, dataclass

HOST = "127.0.0.1"
#: Largest notice a listener reads (a notice is ~150 bytes; `detail` is a transactional.id).
MAX_NOTICE = 65_507


@dataclass(frozen=True)
class FaultNotice:
    """One hit of an armed fault point: it fired (``reached``) or let the hit pass (``passed``)."""

    point: str
    event: str  # "reached" | "passed"
    action: str  # what the point does when it fires (crash, pause, hold)
    hit: int  # 1-based count of this point's hits in this broker process
    node: int  # node.id of the broker
    pid: int
    detail: str = ""

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> "FaultNotice":
        return cls(**json.loads(data))


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"kconform.fault.notify={text!r}: expected HOST:PORT")
    return host, int(port)


class NoticeSender:
    """The broker's end: one UDP socket, one datagram per notice, errors swallowed (a fault point
    must act even when nobody listens)."""

    def __init__(self, address: str) -> None:
        self.address = parse_address(address)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self, notice: FaultNotice) -> None:
        try:
            self._sock.sendto(notice.encode(), self.address)
        except OSError:
            pass

    def close(self) -> None:
        self._sock.close()


class FaultListener:
    """The harness's end: a UDP socket on 127.0.0.1 and a thread that keeps every notice.

    ``address`` goes into the broker's ``kconform.fault.notify``. ``wait_reached`` blocks until
    a point fired; ``hits`` tells, per node and point, how many hits were let pass and whether
    it fired -- what a restart needs to re-arm only the points that have not fired yet.
    """

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((HOST, 0))
        self._sock.settimeout(0.5)
        self.address = f"{HOST}:{self._sock.getsockname()[1]}"
        self._cond = threading.Condition()
        self._notices: list[FaultNotice] = []
        self._handed: set[int] = set()  # indexes of reached-notices wait_reached returned
        self._closed = False
        self._thread = threading.Thread(target=self._receive, name=f"fault-listener-{self.address}", daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closed:
            try:
                data = self._sock.recv(MAX_NOTICE)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                notice = FaultNotice.decode(data)
            except (ValueError, TypeError):
                continue  # not ours: the port is ephemeral, a stray datagram is possible
            with self._cond:
                self._notices.append(notice)
                self._cond.notify_all()

    @property
    def notices(self) -> list[FaultNotice]:
        with self._cond:
            return list(self._notices)

    def wait_reached(self, point: str, timeout: float) -> FaultNotice | None:
        """The oldest ``reached`` notice of `point` not handed out before (None on timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i, n in enumerate(self._notices):
                    if n.event == "reached" and n.point == point and i not in self._handed:
                        self._handed.add(i)
                        return n
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    return None
                self._cond.wait(left)

    def hits(self, node: int) -> dict[str, tuple[int, bool]]:
        """Per point, for one node: (hits let pass, fired) over every life of that node."""
        out: dict[str, tuple[int, bool]] = {}
        for n in self.notices:
            if n.node != node:
                continue
            passed, fired = out.get(n.point, (0, False))
            if n.event == "passed":
                passed += 1
            elif n.event == "reached":
                fired = True
            out[n.point] = (passed, fired)
        return out

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._sock.close()
