"""Requests generated from Kafka's JSON schemas: the shape clients send, and boundary values.

Why from the schemas: the embedded broker (or any peer) can differ from Kafka in any of hundreds
of fields per API version, and a hand-written request per API and version would cover what its
author thought of. Here every field of every version is walked from the codec's specs (the same
specs the codec is generated from), and a field gets

- in the *valid* request, the value a client sends: by its name (`VALUES`: a topic name where
  the schema's struct holds a topic, -1 for `replica_id`, the probe's group for `group_id`, a
  reference to an earlier step's response for `member_id` or `producer_id` -- see recipes.py),
  and Kafka's default for any field not named there;
- in one *variant* each (`variants`), a boundary value: an empty and a null array or string
  (null also where the schema forbids it: Kafka refuses such a request at parse time), -1 / 0 /
  the type's maximum for ids, epochs and partition indexes, an unknown topic name or topic id,
  and, in flexible versions, unknown tagged fields in the header and the body.

A request body here is a template: a dict of Kafka's field names (snake_case) as
conformance/raw.py builds requests from (`{batch: ...}` for record batches), with
`"${step.field}"` references that are resolved per target when the probe runs -- each target
answers with its own producer ids, member ids and topic ids.
"""
from __future__ import annotations

import copy
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from broker_impl.codec import API, uvarint_bytes

#: Integer ranges of Kafka's types (the `max` boundary value).
INT_MAX = {"int8": 2**7 - 1, "int16": 2**15 - 1, "uint16": 2**16 - 1, "int32": 2**31 - 1,
           "uint32": 2**32 - 1, "int64": 2**63 - 1}
#: Timestamp of every generated record batch: one per process, so both targets of a run store
#: the same bytes and a Fetch of them compares byte for byte; recent, because Kafka's time
#: retention (7 days) deletes a segment whose newest record is older (measured: a fixed 2023
#: timestamp had the data topic emptied in the middle of a run).
BATCH_TIMESTAMP = int(time.time()) // 60 * 60_000
#: A topic name, a group or transactional id, and a topic id no target has.
UNKNOWN_TOPIC = "wd-no-such-topic"
UNKNOWN_ID = "$unknown"  # the probe's own `Names.unknown`: an id that only this probe names
UNKNOWN_TOPIC_ID = "a5f3c1e2b4d6478899aabbccddeeff01"
ZERO_UUID = "00" * 16
#: A tag no schema uses: a broker must skip it (KIP-482).
UNKNOWN_TAG = 4242


@dataclass(frozen=True)
class Names:
    """The names one probe uses; unique per probe, the same on every target."""

    topic: str        # the read-only data topic (created and filled once, at the start)
    new_topic: str    # a topic this probe creates (Produce, topic admin, transactions)
    group: str
    txn: str
    unknown: str      # a group or transactional id nobody uses (the "unknown" variants)


#: Value a client sends, by field name (`Api.field` and `Struct.field` win over `field`). A
#: string starting with `$` is a role filled per probe (`fill`), anything else is taken as is.
VALUES: dict[str, Any] = {
    # topics and partitions
    "topic": "$topic", "topic_names": ["$topic"], "resource_name": "$topic", "topic_id": "$topic_id",
    # by name where both are in the schema, as clients do (Kafka refuses a name and an id at once)
    "MetadataRequestTopic.topic_id": ZERO_UUID, "DeleteTopicState.topic_id": ZERO_UUID,
    "index": 0, "partition": 0, "partition_index": 0, "partition_indexes": [0], "partitions": [0],
    "broker_ids": [1],
    # Produce / Fetch / ListOffsets / OffsetForLeaderEpoch: a consumer's and a producer's values
    "acks": -1, "timeout_ms": 5000, "Produce.transactional_id": None, "records": "$batch",
    "replica_id": -1, "OffsetForLeaderEpoch.replica_id": -1, "max_wait_ms": 100, "min_bytes": 1,
    "max_bytes": 1048576, "partition_max_bytes": 1048576, "isolation_level": 0, "session_id": 0,
    "session_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "current_leader_epoch": -1,
    "last_fetched_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "timestamp": -1,
    "leader_epoch": 0, "allow_auto_topic_creation": False,
    # groups
    "group_id": "$group", "groups": ["$group"], "groups_names": ["$group"], "coordinator_keys": ["$group"],
    "key": "$group", "key_type": 0, "member_id": "$member_id", "generation_id": "$generation_id",
    "generation_id_or_member_epoch": "$generation_id", "member_epoch": -1,
    "OffsetFetchRequestGroup.member_id": None, "group_instance_id": None, "reason": None,
    "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "protocol_type": "consumer",
    "protocol_name": "range", "JoinGroupRequestProtocol.name": "range", "metadata": "$subscription",
    "SyncGroup.assignments": [{"member_id": "$member_id", "assignment": "$assignment"}],
    "retention_time_ms": -1, "committed_offset": 1, "committed_leader_epoch": -1, "committed_metadata": "",
    "states_filter": [], "types_filter": [], "require_stable": False,
    # transactions
    "transactional_id": "$txn", "transactional_ids": ["$txn"], "v3_and_below_transactional_id": "$txn",
    "producer_id": "$producer_id", "producer_epoch": "$producer_epoch",
    "v3_and_below_producer_id": "$producer_id", "v3_and_below_producer_epoch": "$producer_epoch",
    "InitProducerId.producer_id": -1, "InitProducerId.producer_epoch": -1, "transaction_timeout_ms": 60000,
    "committed": True, "verify_only": False, "transaction_result": False, "coordinator_epoch": 0,
    "transaction_version": 0, "state_filters": [], "producer_id_filters": [], "duration_filter": -1,
    "transactional_id_pattern": None,
    # topics, configs, cluster
    "num_partitions": 1, "replication_factor": 1, "CreateTopics.timeout_ms": 30000,
    "CreatableTopic.assignments": [], "configs": [], "validate_only": False,
    "resource_type": 2, "configuration_keys": None, "include_synonyms": False, "include_documentation": False,
    "endpoint_type": 1, "client_software_name": "kconform", "client_software_version": "1.0",
}

#: The APIs whose requests name the probe's own topic (recipes.py creates it first, except for
#: CreateTopics); the others name the read-only data topic.
NEW_TOPIC_APIS = frozenset({"Produce", "CreateTopics", "DeleteTopics",
                            "AddPartitionsToTxn", "EndTxn", "WriteTxnMarkers", "DescribeProducers",
                            "DescribeTransactions", "ListTransactions"})
#: []int32 fields whose elements are partition indexes or ids (-1 and max variants).
ID_ARRAYS = frozenset({"partitions", "partition_indexes", "broker_ids", "producer_id_filters"})
#: Fields naming a group or a transactional id ("unknown" variants), alone or as []string.
NAME_FIELDS = frozenset({"group_id", "transactional_id", "v3_and_below_transactional_id", "key"})
NAME_ARRAYS = frozenset({"groups", "groups_names", "coordinator_keys", "transactional_ids"})


#: Roles with one value per probe (the rest are references recipes.py supplies).
def _role(role: str, names: Names, api: str, refs: dict[str, Any]) -> Any:
    if role in refs:
        return refs[role]
    if role == "$topic":
        return names.new_topic if api in NEW_TOPIC_APIS else names.topic
    if role == "$topic_id":
        if api in NEW_TOPIC_APIS:  # created by the probe's own first step (recipes.py)
            return "${create.response.topics.0.topic_id}"
        return "${ctx.topic_id}"  # the data topic's id on this target (run.prepare)
    if role == "$group":
        return names.group
    if role == "$txn":
        return names.txn
    if role == "$batch":
        return {"batch": {"values": ["v0", "v1", "v2"], "keys": ["k0", "k1", "k2"], "timestamp": BATCH_TIMESTAMP}}
    if role == "$subscription":
        return subscription(names.topic).hex()
    if role == "$assignment":
        return assignment(names.topic, [0]).hex()
    if role in ("$member_id",):
        return ""
    if role in ("$generation_id", "$producer_id", "$producer_epoch"):
        return -1
    raise KeyError(f"no value for role {role}")


def subscription(topic: str) -> bytes:
    """A ConsumerProtocolSubscription v0 (JoinGroup metadata of protocol type `consumer`)."""
    t = topic.encode()
    return struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", -1)


def assignment(topic: str, partitions: list[int]) -> bytes:
    """A ConsumerProtocolAssignment v0 (SyncGroup assignment of protocol type `consumer`)."""
    t = topic.encode()
    return (struct.pack(">hih", 0, 1, len(t)) + t + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


def _holds_topic(struct_name: str) -> bool:
    """A struct whose `name` is a topic name (TopicProduceData, CreatableTopic, ...)."""
    return "Topic" in struct_name and "Config" not in struct_name


def _lookup(api: str, struct_name: str, f) -> tuple[bool, Any]:
    for key in (f"{api}.{f.attr}", f"{struct_name}.{f.attr}", f.attr):
        if key in VALUES and _fits(f, VALUES[key]):
            return True, VALUES[key]
    if f.attr == "name" and _holds_topic(struct_name):
        return True, "$topic"
    return False, None


def _fits(f, value: Any) -> bool:
    """A value named for a field fits it: structs take mappings (or lists of them), the other
    types anything else -- `partitions` is [0] where it is []int32, a struct list elsewhere."""
    if f.struct is None:
        return not isinstance(value, dict) and not (isinstance(value, list) and value and isinstance(value[0], dict))
    return isinstance(value, dict) or (isinstance(value, list) and (not value or isinstance(value[0], dict)))


def _resolve_roles(value: Any, names: Names, api: str, refs: dict[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("$"):
        return _role(value, names, api, refs)
    if isinstance(value, list):
        return [_resolve_roles(v, names, api, refs) for v in value]
    if isinstance(value, dict):
        return {k: _resolve_roles(v, names, api, refs) for k, v in value.items()}
    return value


def valid_body(api: str, version: int, names: Names, refs: dict[str, Any] | None = None) -> dict:
    """The request a client sends for `api` at `version`, as a template (module doc)."""
    spec = API[api].request.spec
    return _fill(api, spec.root, version, names, refs or {}, spec.flexible)


def _fill(api: str, st, version: int, names: Names, refs: dict[str, Any], flexible) -> dict:
    out: dict[str, Any] = {}
    for f in st.fields:
        if version not in f.versions:
            continue
        if version in flexible and version in f.tagged:
            continue  # tagged fields stay at their defaults, as clients leave them
        known, value = _lookup(api, st.name, f)
        if known:
            out[f.attr] = _resolve_roles(copy.deepcopy(value), names, api, refs)
        elif f.struct is not None:
            sub = _fill(api, f.struct, version, names, refs, flexible)
            out[f.attr] = [sub] if f.is_array else sub
        # anything else: Kafka's default (not written into the template)
    return out


# ============================================================================ variants
@dataclass(frozen=True)
class Variant:
    """One request of a probe: the valid body with the field at `path` set to `value` (no path:
    the body as it is); `name` says what differs."""

    name: str
    path: tuple | None = None
    value: Any = None
    unknown_tags: bool = False
    #: The body breaks the schema (null where it is not nullable): Kafka refuses it at parse time.
    violates_schema: bool = False

    def apply(self, body: dict, names: Names) -> dict:
        if self.path is None:
            return body
        value = self.value
        if value == UNKNOWN_ID or value == [UNKNOWN_ID]:
            value = names.unknown if value == UNKNOWN_ID else [names.unknown]
        return _set(body, self.path, value)


@dataclass
class _FieldAt:
    path: tuple           # keys and list indexes into the template
    spec: Any             # FieldSpec
    struct_name: str
    value: Any = field(default=None)


def _fields(api: str, st, body: dict, version: int, path: tuple = ()) -> Iterator[_FieldAt]:
    for f in st.fields:
        if f.attr not in body:
            continue
        v = body[f.attr]
        here = path + (f.attr,)
        yield _FieldAt(here, f, st.name, v)
        if f.struct is not None and isinstance(v, list) and v and isinstance(v[0], dict):
            yield from _fields(api, f.struct, v[0], version, here + (0,))
        elif f.struct is not None and isinstance(v, dict):
            yield from _fields(api, f.struct, v, version, here)


def _label(path: tuple) -> str:
    return ".".join(str(p) for p in path if not isinstance(p, int))


def _set(body: dict, path: tuple, value: Any) -> dict:
    out = copy.deepcopy(body)
    cur: Any = out
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return out


def _is_id(attr: str) -> bool:
    return (attr.endswith(("_id", "_epoch")) or attr in ("partition", "index", "partition_index",
                                                         "generation_id", "generation_id_or_member_epoch"))


def variants(api: str, version: int, body: dict) -> list[Variant]:
    """The boundary variants of a valid body (module doc), each named `kind:field.path`."""
    spec = API[api].request.spec
    out: list[Variant] = []
    seen: set[str] = set()

    def add(name: str, path: tuple, value: Any, violates: bool = False) -> None:
        var = Variant(name, path, value, violates_schema=violates)
        if name not in seen and var.apply(body, _NO_NAMES) != body:
            seen.add(name)
            out.append(var)

    for at in _fields(api, spec.root, body, version):
        f, label = at.spec, _label(at.path)
        nullable = version in f.nullable
        if f.is_array:
            add(f"empty:{label}", at.path, [])
            add(f"null:{label}", at.path, None, not nullable)
            if f.elem_type in INT_MAX and f.attr in ID_ARRAYS:
                for tag, n in (("-1", -1), ("max", INT_MAX[f.elem_type])):
                    add(f"{tag}:{label}[]", at.path, [n])
            if f.elem_type == "string" and f.attr in NAME_ARRAYS:
                add(f"unknown:{label}[]", at.path, [UNKNOWN_ID])
        elif f.type == "string":
            add(f"empty:{label}", at.path, "")
            add(f"null:{label}", at.path, None, not nullable)
            if at.value == _topic_of(body, at) and isinstance(at.value, str) and at.value:
                add(f"unknown:{label}", at.path, UNKNOWN_TOPIC)
            elif f.attr in NAME_FIELDS and isinstance(at.value, str) and at.value:
                add(f"unknown:{label}", at.path, UNKNOWN_ID)
        elif f.type in ("records", "bytes"):
            add(f"empty:{label}", at.path, "")
            add(f"null:{label}", at.path, None, not nullable)
        elif f.type == "uuid" and f.attr == "topic_id":
            add(f"unknown:{label}", at.path, UNKNOWN_TOPIC_ID)
            add(f"zero:{label}", at.path, ZERO_UUID)
        elif f.type in INT_MAX and _is_id(f.attr):
            for tag, n in (("-1", -1), ("0", 0), ("max", INT_MAX[f.type])):
                add(f"{tag}:{label}", at.path, n)
    if version in spec.flexible:
        out.append(Variant("unknown-tagged-fields", unknown_tags=True))
    return out


_NO_NAMES = Names("", "", "", "", "-")


def _topic_of(body: dict, at: _FieldAt) -> Any:
    """The value a topic-name field has, or a sentinel when the field is no topic name."""
    f = at.spec
    if f.attr in ("topic", "resource_name") or (f.attr == "name" and _holds_topic(at.struct_name)):
        return at.value
    return object()


# ============================================================================ frames
def with_unknown_tags(frame: bytes, api: str, version: int) -> bytes:
    """`frame` with one unknown tagged field in its request header (v2) and one at the end of
    its body: both sections must be empty in a frame built from a template (clients leave
    tagged fields at their defaults), so each is the single byte 0 this replaces."""
    a = API[api]
    if not a.is_flexible(version):
        raise ValueError(f"{api} v{version} is not a flexible version: it has no tagged fields")
    (client_id_len,) = struct.unpack_from(">h", frame, 12)
    header_tags = 14 + max(client_id_len, 0)
    if frame[header_tags] != 0 or frame[-1] != 0:
        raise ValueError("the frame already carries tagged fields")
    field_bytes = uvarint_bytes(1) + uvarint_bytes(UNKNOWN_TAG) + uvarint_bytes(8) + b"kconform"
    out = frame[4:header_tags] + field_bytes + frame[header_tags + 1:-1] + field_bytes
    return struct.pack(">i", len(out)) + out

