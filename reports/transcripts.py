"""The transcript file of one case (``artifacts.transcript``), read and written.

One JSON object per frame, in the order the proxy saw them (see
docs/results-schema.md): ``t`` seconds since the case started, ``conn`` a
connection id, ``dir`` ``c2b`` or ``b2c``, ``src``/``dst`` ``host:port``,
and ``data`` the whole frame (4-byte size included) in base64. The other
fields (api name, correlation id, ...) are conveniences for readers; the
bytes are the truth, so this module keeps them and recomputes the rest.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Frame:
    t: float
    conn: str
    dir: str          # "c2b" | "b2c"
    src: str          # "127.0.0.1:50001"
    dst: str          # "127.0.0.1:9092"
    data: bytes       # the whole frame, size prefix included

    @property
    def client(self) -> str:
        return self.src if self.dir == "c2b" else self.dst

    @property
    def broker(self) -> str:
        return self.dst if self.dir == "c2b" else self.src


def split_address(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:9092"`` or ``"[::1]:9092"`` -> (host, port)."""
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def read_transcript(path: str | Path) -> list[Frame]:
    frames: list[Frame] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
                frames.append(Frame(float(d["t"]), str(d["conn"]), d["dir"], d["src"], d["dst"],
                                    base64.b64decode(d["data"])))
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: not a transcript line: {exc}") from None
            if frames[-1].dir not in ("c2b", "b2c"):
                raise ValueError(f"{path}:{lineno}: dir must be c2b or b2c, not {frames[-1].dir!r}")
    return frames


def frame_line(f: Frame) -> dict:
    """The transcript line for ``f``, with the header fields a reader wants filled in."""
    from broker_impl.codec import request_info, response_info  # the codec is only needed when writing

    line = {"t": round(f.t, 6), "conn": f.conn, "dir": f.dir, "src": f.src, "dst": f.dst,
            "size": len(f.data) - 4}
    info = request_info(f.data) if f.dir == "c2b" else response_info(f.data)
    if info.api_key is not None:
        line.update(api_key=info.api_key, api_name=info.api_label, api_version=info.api_version,
                    correlation_id=info.correlation_id)
    elif info.correlation_id is not None:
        line["correlation_id"] = info.correlation_id
    line["data"] = base64.b64encode(f.data).decode("ascii")
    return line


def write_transcript(path: str | Path, frames: list[Frame]) -> Path:
    path = Path(path)
    with open(path, "w", encoding="utf-8") as fh:
        for f in frames:
            fh.write(json.dumps(frame_line(f), separators=(",", ":")) + "\n")
    return path
