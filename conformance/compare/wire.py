"""Normalising a decoded Kafka response so that two brokers' answers compare field by field.

Used by `kconform diff` (every generated request, on two targets) and by a run's structural
diff (the responses of raw `request` steps), so both mask the same things for the same reasons.

Masks (`WIRE_MASKS`): fields whose value must differ between two correct brokers, replaced by a
placeholder that still keeps what must not differ -- an id that is there or not (-1, a zero
UUID, null), a time that is set or not. docs/wirediff.md lists them with their reasons; each
mask here carries its reason too.

Keyed lists: an array of structs whose elements have a natural key (a topic name, a partition
index, an API key, a group id...) becomes a dict keyed `field=value`, so that a difference
reads `responses.name=t1.partition_responses.index=0.error_code` and the order of elements,
which Kafka does not specify for these lists, does not count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

ZERO_UUID = "00" * 16
_UUID_TAIL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Mask:
    field: str   # Kafka's field name, snake_case (the codec's attribute)
    kind: str    # see _masked
    reason: str


WIRE_MASKS: tuple[Mask, ...] = (
    Mask("throttle_time_ms", "any", "how long a broker asks a client to wait depends on its quotas and load, "
                                    "not on the request"),
    Mask("cluster_id", "set", "each cluster draws its own id at format time; null vs an id is kept"),
    Mask("host", "any", "each broker listens where it was started"),
    Mask("port", "any", "each broker listens where it was started"),
    Mask("topic_id", "uuid", "a topic's id is drawn when it is created; the zero UUID vs an id is kept"),
    Mask("producer_id", "id", "each broker hands out its own producer ids (Kafka in blocks from the "
                              "controller); -1 (none) vs an id is kept"),
    Mask("member_id", "member", "a member id is the client id and a random UUID (KIP-394); the client id "
                                "part and empty vs set are kept"),
    Mask("leader", "member", "the leader's member id (see member_id)"),
    Mask("session_id", "nonzero", "a fetch session id is random (KIP-227); 0 (no session) vs an id is kept"),
    Mask("transaction_start_time_ms", "time", "the wall-clock time the transaction started; -1 vs a time "
                                              "is kept"),
    Mask("finalized_features_epoch", "set", "Kafka's is the offset of the metadata log where the features were "
                                            "last finalized, which every metadata change moves; -1 (none) vs an "
                                            "epoch is kept"),
    Mask("last_timestamp", "time", "DescribeProducers: the timestamp of the producer's last batch, which for a "
                                   "transaction marker is the wall-clock time it was written; -1 vs a time is kept"),
    Mask("log_append_time_ms", "time", "Produce: the broker's wall-clock time of the append when the topic uses "
                                       "LogAppendTime; -1 (CreateTime) vs a time is kept"),
    Mask("log_dir", "text", "DescribeLogDirs: the absolute path of the broker's log directory, wherever it was "
                            "started; null or empty vs a path is kept"),
    Mask("total_bytes", "set", "DescribeLogDirs v4+: the size of the volume holding the log directory; -1 (not "
                               "given) vs a size is kept"),
    Mask("usable_bytes", "set", "DescribeLogDirs v4+: the free space of that volume, which every write moves; -1 "
                                "(not given) vs a size is kept"),
    Mask("error_message", "text", "free text in each broker's words; null vs a message is kept (clients "
                                  "show it to users)"),
)
_BY_FIELD = {m.field: m for m in WIRE_MASKS}

#: Fields whose values are node ids: with a target's node ids given (`nodes`), each is named by
#: its place in the cluster (node-1, node-2...), since each cluster numbers its nodes its own way
#: (Kafka and the embedded broker from 1, Tansu 111, kfake from 0); -1 (none) is kept.
NODE_FIELDS = frozenset({"node_id", "leader_id", "controller_id", "broker_id", "replica_nodes", "isr_nodes",
                         "offline_replicas", "preferred_read_replica", "eligible_leader_replicas",
                         "last_known_elr", "coordinator_id"})

#: Fields that name an element of an array of structs, in the order they are tried.
KEY_FIELDS = ("name", "topic", "topic_name", "topic_id", "partition_index", "partition", "index", "api_key",
              "group_id", "transactional_id", "resource_name", "key", "broker_id", "node_id", "member_id",
              "producer_id")


def _masked(kind: str, value: Any) -> Any:
    if kind == "any":
        return "<masked>"
    if kind == "set":
        return value if value in (None, "", -1) else "<set>"
    if kind == "uuid":
        return value if value in (None, ZERO_UUID) else "<uuid>"
    if kind == "id":
        return value if not isinstance(value, int) or value < 0 else "<id>"
    if kind == "nonzero":
        return value if not isinstance(value, int) or value == 0 else "<id>"
    if kind == "time":
        return value if not isinstance(value, int) or value <= 0 else "<time>"
    if kind == "text":
        return value if value in (None, "") else "<text>"
    if kind == "member":
        if not isinstance(value, str) or not value:
            return value
        return _UUID_TAIL.sub("<uuid>", value) if _UUID_TAIL.search(value) else "<member>"
    raise ValueError(f"unknown mask kind {kind!r}")


def normalise_response(tree: Any, keep: Callable[[str, Any], bool] | None = None,
                       nodes: dict[int, str] | None = None) -> Any:
    """A copy of a decoded response (the codec's ``to_dict()``) with WIRE_MASKS applied and keyed
    lists turned into dicts (module doc). `keep(field, key value)`: elements of keyed lists it
    says False for are left out (`kconform diff` keeps a probe's own topics and groups of the
    lists that name every one of the cluster's). `nodes`: the target's node id -> its name
    (NODE_FIELDS)."""
    if isinstance(tree, dict):
        out = {}
        for k, v in tree.items():
            if nodes is not None and k in NODE_FIELDS:
                out[k] = [nodes.get(x, x) for x in v] if isinstance(v, list) else nodes.get(v, v)
            elif k in _BY_FIELD and not isinstance(v, (dict, list)):
                out[k] = _masked(_BY_FIELD[k].kind, v)
            else:
                out[k] = normalise_response(v, keep, nodes)
        return out
    if isinstance(tree, list):
        items = [normalise_response(v, keep, nodes) for v in tree]
        return _keyed(items, keep) if items and all(isinstance(i, dict) for i in items) else items
    return tree


def node_names(node_ids) -> dict[int, str]:
    """A cluster's node ids named by their place: the lowest id is node-1."""
    return {n: f"node-{i}" for i, n in enumerate(sorted(node_ids), start=1)}


def _keyed(items: list[dict], keep) -> Any:
    for k in KEY_FIELDS:
        values = [i.get(k, _NONE) for i in items]
        if _NONE in values or not all(isinstance(v, (str, int)) for v in values) or len(set(values)) < len(values):
            continue
        return {f"{k}={v}": i for i, v in zip(items, values) if keep is None or keep(k, v)}
    return items


_NONE = object()
