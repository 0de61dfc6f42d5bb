"""Broker addresses in responses, rewritten to the proxy's own ports -- so clients never bypass it.

Why: a client bootstraps from the proxy, but every later connection goes where the broker's
responses point: Metadata's brokers, FindCoordinator's coordinator, DescribeCluster's brokers,
and (KIP-951) the NodeEndpoints a Produce or Fetch response carries with NOT_LEADER_OR_FOLLOWER.
A broker that can be told to advertise the proxy's ports (`advertised.listeners`) needs none
of this; every other one -- Tansu, kfake, librdkafka's mock, an external cluster, or one Apache
Kafka shared by several case runs each behind its own proxy -- would be left behind after the
first Metadata. So the proxy rewrites: every struct of a response that names a broker (a node
id with a host and a port) gets the address of the proxy's listener for that node id, which
the proxy opens the first time it sees the node and points at the address the broker gave.

Which responses: those whose schema has such a struct, found in Kafka's own JSON schemas (the
codec's specs), so a new API that names brokers is covered without a list kept by hand. A
response is decoded only when its API is one of them, and re-encoded only when an address
changed; an address that already is one of the proxy's listeners (an advertising broker) is
left alone, so nothing is re-encoded there. The transcript keeps the bytes the broker sent and
notes each rewrite (`rewritten: ["node 111: 127.0.0.1:9092 -> 127.0.0.1:40011"]`).
"""
from __future__ import annotations

from functools import cache
from typing import Callable

from broker_impl.codec import API_BY_KEY, RESPONSE_HEADER, FrameInfo, ProtocolError

#: Field names of a node id in the structs that name a broker.
NODE_ID_FIELDS = ("node_id", "broker_id")

#: (node id, host, port) -> the (host, port) a client must use instead.
LocalAddress = Callable[[int, str, int], tuple[str, int]]


def _names_brokers(struct) -> bool:
    attrs = {f.attr for f in struct.fields}
    return {"host", "port"} <= attrs and bool(attrs & set(NODE_ID_FIELDS))


@cache
def rewritten_apis() -> frozenset[int]:
    """API keys whose response schema has a struct naming a broker (node id, host, port)."""
    out = set()
    for key, api in API_BY_KEY.items():
        seen: set[str] = set()
        todo = [api.response.spec.root]
        while todo:
            st = todo.pop()
            if st.name in seen:
                continue
            seen.add(st.name)
            if _names_brokers(st):
                out.add(key)
                break
            todo += [f.struct for f in st.fields if f.struct is not None]
    return frozenset(out)


def _rewrite_structs(obj, local: LocalAddress, changes: list[str]) -> None:
    if isinstance(obj, list):
        for item in obj:
            _rewrite_structs(item, local, changes)
        return
    fields = getattr(obj, "_fields", None)
    if fields is None:
        return
    if "host" in fields and "port" in fields:
        node = next((getattr(obj, f) for f in NODE_ID_FIELDS if f in fields), None)
        host, port = obj.host, obj.port
        if node is not None and node >= 0 and host:
            new_host, new_port = local(node, host, port)
            if (new_host, new_port) != (host, port):
                obj.host, obj.port = new_host, new_port
                changes.append(f"node {node}: {host}:{port} -> {new_host}:{new_port}")
    for f in fields:
        value = getattr(obj, f)
        if isinstance(value, list) or hasattr(value, "_fields"):
            _rewrite_structs(value, local, changes)


def rewrite_response(frame: bytes, info: FrameInfo, local: LocalAddress) -> tuple[bytes, list[str]] | None:
    """The frame with every broker address it names replaced by ``local(node, host, port)``,
    and what changed; None when nothing changed (or the frame is not a response this can read:
    it then goes on as it came, the client will say what is wrong with it)."""
    if info.api_key not in rewritten_apis() or info.api_version is None:
        return None
    api = API_BY_KEY[info.api_key]
    version = info.api_version
    try:
        header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), frame, 4)
        body, _ = api.response.decode(version, frame, pos)
    except (ProtocolError, ValueError):
        return None
    changes: list[str] = []
    _rewrite_structs(body, local, changes)
    if not changes:
        return None
    return api.response_frame(version, header.correlation_id, body), changes
