"""The frames the fuzzer mutates: real clients' requests, and requests generated from the schemas.

Three sources, all request frames as they cross the wire (size prefix included):
- `client_frames`: a real client's session (session.py) run through the proxy in front of the
  target, its requests taken from the proxy's transcript;
- `transcript_frames`: the requests of earlier runs (`kconform run` results: every case's
  transcript.jsonl), so the library's own cases -- raw frames included -- seed the fuzzing too;
- `generated_frames`: for every API and version the target advertises, the request a client
  sends and its boundary variants, as `kconform diff` generates them (wirediff/generate.py).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from broker_impl.codec import API_BY_KEY, request_info

from ..proxy.transcript import frame_bytes
from ..raw import RequestError, build_request
from ..runner.proxying import ProxyFront
from ..wirediff.generate import Names, valid_body, variants, with_unknown_tags
from .session import client_session


def usable(frame: bytes | None) -> bool:
    """A whole request frame of an API the codec knows (the mutations start from those)."""
    if frame is None or len(frame) < 12:
        return False
    info = request_info(frame)
    return info.api_key in API_BY_KEY and info.size == len(frame)


def transcript_frames(paths: Iterable[Path]) -> list[bytes]:
    """The client-to-broker frames of every transcript.jsonl under `paths` (files or directories)."""
    out: list[bytes] = []
    for root in paths:
        files = [root] if root.is_file() else sorted(root.rglob("transcript.jsonl"))
        for f in files:
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        d = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if d.get("dir") == "c2b" and not d.get("truncated") and not d.get("unframed"):
                        frame = frame_bytes(d)
                        if usable(frame):
                            out.append(frame)
    return out


def generated_frames(ranges: dict[int, tuple[int, int]], names: Names, topic_id: str) -> list[bytes]:
    """The valid request and every boundary variant of every API version in `ranges` (the
    target's ApiVersions) that the codec knows."""
    out: list[bytes] = []
    for key, (lo, hi) in sorted(ranges.items()):
        api = API_BY_KEY.get(key)
        if api is None:
            continue
        for v in range(max(lo, api.min_version), min(hi, api.max_version) + 1):
            body = valid_body(api.name, v, names, {"$topic_id": topic_id})
            for var in [None] + variants(api.name, v, body):
                b = body if var is None else var.apply(body, names)
                try:
                    frame = build_request(api.name, v, b)
                    if var is not None and var.unknown_tags:
                        frame = with_unknown_tags(frame, api.name, v)
                except (RequestError, TypeError, ValueError, OverflowError):
                    continue
                out.append(frame)
    return out


def client_frames(target, topic: str, tag: str, timeout: float = 60.0) -> tuple[list[bytes], str | None]:
    """The requests of one real client session (session.py) with `target`, through the proxy;
    and why the session failed, when it did (the frames it sent still count)."""
    front = ProxyFront.rewriting(target)
    try:
        result = client_session(front.bootstrap, topic, tag, timeout,
                                transactions="transactions" in target.capabilities)
        lines = front.server.transcript.lines()
    finally:
        front.stop()
    frames = [frame_bytes(d) for d in lines if d.get("dir") == "c2b" and not d.get("truncated")]
    return [f for f in frames if usable(f)], result.error


def by_api(frames: list[bytes]) -> dict[str, int]:
    """How many frames of each API (what the seeds cover)."""
    out: dict[str, int] = {}
    for f in frames:
        name = API_BY_KEY[request_info(f).api_key].name
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items()))

