"""The proxy's record of every frame it saw, as the "Transcript line" of docs/results-schema.md.

One JSON object per frame::

    {"t": 0.0123, "conn": 3, "node": 1, "dir": "c2b",
     "src": "127.0.0.1:50412", "dst": "127.0.0.1:9092",
     "api_key": 0, "api_name": "Produce", "api_version": 9, "correlation_id": 7,
     "client_id": "rdkafka", "size": 1238, "data": "<base64>", "captured": 1238,
     "truncated": false, "rule": 2, "action": "drop"}

``src``/``dst`` are the real endpoints, client and broker (not the proxy's own ports), so a
pcap written from the transcript shows the conversation the client and broker had. ``size`` is
the whole frame, its 4-byte size prefix included; ``data`` is base64 of the first ``captured``
bytes of it (``truncated`` when that is less than ``size``). ``rule``/``action`` name the rule
that acted on the frame (null when none did); a ``corrupt`` frame also carries ``sent``, the
base64 of the bytes forwarded instead. Bytes the proxy could not split into frames (a size
prefix out of range: garbage, or a corrupted stream) are recorded as they came, with
``"unframed": true``.

A SaslAuthenticate request's ``auth_bytes`` are recorded as ``*`` of their length
(``"redacted": true``): PLAIN sends the password itself and OAUTHBEARER a bearer token, and a
transcript, its pcap and the reports made of it must never hold a credential.

Memory is bounded twice: at most ``max_frame_bytes`` of each frame are kept (64 KiB by
default), and once ``max_memory_bytes`` of frame data are held in memory, later lines keep
their metadata but not their data (``"data": null``, ``"data_dropped": true``). A transcript
given a ``path`` also streams every line to that file as it happens, unaffected by the
memory budget, so a crashed run still leaves its transcript behind.
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import time
from pathlib import Path
from typing import IO, Any, Iterator

from broker_impl.codec import (API_BY_KEY, REQUEST_HEADER, RESPONSE_HEADER, FrameInfo, ProtocolError, error_name,
                               sasl_token_span)

from .rules import source_of

DEFAULT_MAX_FRAME_BYTES = 64 * 1024
DEFAULT_MAX_MEMORY_BYTES = 256 * 1024 * 1024


class Transcript:
    def __init__(self, path: str | Path | None = None, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.max_memory_bytes = max_memory_bytes
        self._lock = threading.Lock()
        self._lines: list[dict] = []
        self._memory = 0
        self._t0 = time.monotonic()
        self.path = Path(path) if path is not None else None
        self._file: IO[str] | None = open(self.path, "a", encoding="utf-8") if self.path else None

    # ---------------------------------------------------------------- writing
    @property
    def t0(self) -> float:
        """The monotonic time the lines' `t` counts from (since the last restart)."""
        return self._t0

    def now(self) -> float:
        return round(time.monotonic() - self._t0, 6)

    def restart(self) -> None:
        """Forget what was recorded and count time from now (a new case starts)."""
        with self._lock:
            self._lines = []
            self._memory = 0
            self._t0 = time.monotonic()

    def record(self, *, conn: int, node: int | None, src: str, dst: str, info: FrameInfo, data: bytes,
               t: float | None = None, rule: int | None = None, action: str | None = None,
               sent: bytes | None = None, unframed: bool = False, rewritten: list[str] | None = None) -> dict:
        redacted = False
        if info.direction == "c2b":   # a SASL token is a credential (PLAIN's password): never kept
            span = sasl_token_span(data)
            if span is not None:
                data = data[:span[0]] + b"*" * (span[1] - span[0]) + data[span[1]:]
                redacted = True
        captured = data[: self.max_frame_bytes]
        line = {
            "t": self.now() if t is None else t, "conn": conn, "node": node, "dir": info.direction,
            "src": src, "dst": dst,
            "api_key": info.api_key, "api_name": info.api_name, "api_version": info.api_version,
            "correlation_id": info.correlation_id, "client_id": info.client_id,
            "size": len(data), "data": base64.b64encode(captured).decode("ascii"),
            "captured": len(captured), "truncated": len(captured) < len(data),
            "rule": rule, "action": action,
        }
        if sent is not None:
            line["sent"] = base64.b64encode(sent[: self.max_frame_bytes]).decode("ascii")
        if unframed:
            line["unframed"] = True
        if redacted:
            line["redacted"] = True
        if rewritten:
            line["rewritten"] = rewritten
        with self._lock:
            if self._file is not None:
                self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
            cost = len(line["data"]) + len(line.get("sent", ""))
            if self._memory + cost > self.max_memory_bytes:
                line = {**line, "data": None, "data_dropped": True}
                line.pop("sent", None)
            else:
                self._memory += cost
            self._lines.append(line)
        return line

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    # ---------------------------------------------------------------- reading
    def lines(self) -> list[dict]:
        """A snapshot of the lines recorded so far (since the last restart)."""
        with self._lock:
            return list(self._lines)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.lines())

    def __len__(self) -> int:
        with self._lock:
            return len(self._lines)

    def write_jsonl(self, path: str | Path) -> Path:
        """Write the in-memory lines to ``path`` (one JSON object per line)."""
        path = Path(path)
        with open(path, "w", encoding="utf-8") as f:
            for line in self.lines():
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
        return path


def frame_bytes(line: dict) -> bytes | None:
    """The captured bytes of a transcript line (None when they were not kept)."""
    data = line.get("data")
    return None if data is None else base64.b64decode(data)


_BODY_UNREADABLE = (ProtocolError, ValueError, IndexError, struct.error)


def _names(tree: Any) -> Any:
    """A decoded body with its error codes as Kafka's names."""
    if isinstance(tree, dict):
        return {k: (error_name(v) if k.endswith("error_code") and isinstance(v, int) else _names(v))
                for k, v in tree.items()}
    if isinstance(tree, list):
        return [_names(v) for v in tree]
    return tree


def decode_line(line: dict) -> dict | None:
    """One transcript line as a frame a pattern can match: {api, direction, version, from,
    fields (None when the body cannot be read)}; None for a frame that has no API name."""
    api = API_BY_KEY.get(line.get("api_key")) if line.get("api_key") is not None else None
    version = line.get("api_version")
    if api is None or version is None:
        return None
    direction = "request" if line.get("dir") == "c2b" else "response"
    frame = {"api": api.name, "direction": direction, "version": version, "from": source_of(line.get("client_id")),
             "fields": None, "t": line.get("t")}
    data = line.get("data")
    if data is None or line.get("truncated") or line.get("unframed"):
        return frame
    raw = base64.b64decode(data)
    try:
        if direction == "request":
            _, pos = REQUEST_HEADER.decode(api.request_header_version(version), raw, 4)
            body, _ = api.request.decode(version, raw, pos)
        else:
            _, pos = RESPONSE_HEADER.decode(api.response_header_version(version), raw, 4)
            body, _ = api.response.decode(version, raw, pos)
    except _BODY_UNREADABLE:  # a corrupted frame is part of some cases
        return frame
    frame["fields"] = _names(body.to_dict())
    return frame
