"""Probes: the requests sent for one API version, with the short stateful sequences before them.

Why sequences: most of the transactional and group APIs mean nothing on their own. EndTxn needs a
transaction with a partition and records in it, SyncGroup a member that joined, OffsetFetch
offsets that were committed. So a probe is a list of steps -- the ones a client sends first
(init -> add partitions -> produce -> end; join -> sync -> commit), at the versions clients use
(the highest both targets speak), then the probed request at the probed version -- and every
step is sent to both targets and compared: a difference in the sequence is a difference too.

Each probe has names of its own (its topic, group, transactional id), so probes do not see each
other's state, and the same names on every target, so responses compare as they are.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from broker_impl.codec import API

from ..raw import RAW_RETRY
from .generate import BATCH_TIMESTAMP, ZERO_UUID, Names, valid_body, variants

#: A setup step retries what a client retries while a coordinator or a transaction settles.
SETUP_RETRY = RAW_RETRY + ("CONCURRENT_TRANSACTIONS",)
SETUP_TIMEOUT_S = 30.0
#: The probed request retries only what is transient on any target and what a client retries
#: at once: a coordinator still loading, and Kafka's NOT_LEADER_OR_FOLLOWER while a partition
#: leader cannot reach a transaction coordinator it has just learnt of (measured: a transactional
#: Produce answered 6 one time in three). Every other error is the answer under test.
PROBE_RETRY = ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_LEADER_OR_FOLLOWER")
#: What a finished transaction's state reads once its markers are written.
COMPLETE = ("CompleteCommit", "CompleteAbort")

GROUP_APIS = ("Heartbeat", "OffsetCommit", "LeaveGroup", "DescribeGroups")
TXN_ONGOING = ("DescribeTransactions", "ListTransactions")
TXN_PRODUCED = ("EndTxn", "WriteTxnMarkers", "DescribeProducers")


@dataclass(frozen=True)
class Step:
    id: str
    api: str
    version: int
    body: dict
    retry: tuple[str, ...] = ()
    unknown_tags: bool = False
    probed: bool = False
    #: Sent again (up to UNTIL_S) until the response's field at this dotted path has one of
    #: these values: waiting for a state that a broker reaches in the background.
    until: tuple[str, tuple] | None = None
    #: How long the step may take, retries included: a setup step waits like a client for a
    #: coordinator that is still loading (seconds after a restart, on Kafka).
    timeout_s: float = 5.0


@dataclass
class Probe:
    api: str
    version: int
    variant: str
    names: Names
    steps: list[Step] = field(default_factory=list)
    violates_schema: bool = False
    #: Both targets restart before this step (None: no restart): what survives a restart.
    restart_at: int | None = None

    @property
    def id(self) -> str:
        return f"{self.api}/v{self.version}/{self.variant}"


def _step(id_: str, api: str, versions: dict[str, int], names: Names, refs: dict[str, Any], **body) -> Step:
    v = versions[api]
    b = valid_body(api, v, names, refs)
    b.update(body)
    return Step(id_, api, v, b, SETUP_RETRY, timeout_s=SETUP_TIMEOUT_S)


def _setup(api: str, versions: dict[str, int], names: Names) -> tuple[list[Step], dict[str, Any]]:
    """The steps a client sends before `api`, and the references the probed request takes from
    their responses (role -> "${step.field}")."""
    steps: list[Step] = []
    refs: dict[str, Any] = {}
    needs_topic = api in ("Produce", "DeleteTopics", "AddPartitionsToTxn") + TXN_ONGOING + TXN_PRODUCED
    if needs_topic:
        steps.append(_step("create", "CreateTopics", versions, names, refs))
        # as a client does before it uses a new topic: Metadata until its partition has a leader
        # (Kafka's brokers learn of a topic a moment after the controller created it)
        steps.append(_step("ready", "Metadata", versions, names, refs,
                           topics=[{"name": names.new_topic, **({"topic_id": ZERO_UUID}
                                                                if versions["Metadata"] >= 10 else {})}]))
    if api in ("AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit") + TXN_ONGOING + TXN_PRODUCED:
        steps.append(_step("init", "InitProducerId", versions, names, refs))
        refs.update({"$producer_id": "${init.producer_id}", "$producer_epoch": "${init.producer_epoch}"})
    if api in TXN_ONGOING + TXN_PRODUCED:
        steps.append(_step("add", "AddPartitionsToTxn", versions, names, refs))
    if api in TXN_PRODUCED:
        batch = {"batch": {"values": ["t0", "t1"], "producer_id": "${init.producer_id}",
                           "producer_epoch": "${init.producer_epoch}", "base_sequence": 0, "transactional": True,
                           "timestamp": BATCH_TIMESTAMP}}
        steps.append(_step("produce", "Produce", versions, names, {**refs, "$batch": batch},
                           transactional_id=names.txn))
    if api == "TxnOffsetCommit":
        steps.append(_step("offsets", "AddOffsetsToTxn", versions, names, refs))
    if api in GROUP_APIS + ("SyncGroup", "OffsetFetch"):
        steps += _join(versions, names, refs)
    if api in GROUP_APIS + ("OffsetFetch",):
        steps.append(_step("sync", "SyncGroup", versions, names, refs))
    if api == "OffsetFetch":
        steps.append(_step("commit", "OffsetCommit", versions, names, refs))
    if api in ("OffsetDelete", "DeleteGroups", "ListGroups"):
        # a group with committed offsets and no members (a "simple" commit: no generation)
        steps.append(_step("commit", "OffsetCommit", versions, names, {}))
    return steps, refs


def _join(versions: dict[str, int], names: Names, refs: dict[str, Any]) -> list[Step]:
    """JoinGroup as a client sends it: from v4 the first join is answered MEMBER_ID_REQUIRED with
    the member id to join with (KIP-394), so there are two."""
    first = _step("join1", "JoinGroup", versions, names, refs)
    steps = [first]
    last = "join1"
    if first.version >= 4:
        steps.append(_step("join", "JoinGroup", versions, names, refs, member_id="${join1.member_id}"))
        last = "join"
    refs.update({"$member_id": "${" + last + ".member_id}", "$generation_id": "${" + last + ".generation_id}"})
    return steps


def probes(api: str, version: int, versions: dict[str, int], names_for) -> list[Probe]:
    """Every probe of `api` at `version`: the valid request, then each boundary variant.
    `versions`: the version a client uses for each API (setup steps); `names_for(i)`: the names
    of the probe with index i."""
    out: list[Probe] = []
    names = names_for(0)
    setup, refs = _setup(api, versions, names)
    body = valid_body(api, version, names, refs)
    main = Probe(api, version, "valid", names, setup + [Step("probe", api, version, body, PROBE_RETRY, probed=True)])
    if api == "JoinGroup" and version >= 4:  # the second join of the dance, with the member id
        main.steps.append(Step("rejoin", api, version, {**body, "member_id": "${probe.member_id}"}, PROBE_RETRY))
    out.append(main)
    for i, var in enumerate(variants(api, version, body), start=1):
        names = names_for(i)
        setup, refs = _setup(api, versions, names)
        vbody = var.apply(valid_body(api, version, names, refs), names)
        out.append(Probe(api, version, var.name, names,
                         setup + [Step("probe", api, version, vbody, PROBE_RETRY, var.unknown_tags, probed=True)],
                         violates_schema=var.violates_schema))
    return out + sequences(api, version, versions, names_for, len(out))


def sequences(api: str, version: int, versions: dict[str, int], names_for, first: int) -> list[Probe]:
    """The stateful probes of `api` at `version` beyond its variants: errors that only a
    sequence of requests reaches (a sequence gap, a duplicate, a partition not in the
    transaction) and what a broker remembers across a restart. `first`: index of their names."""
    out: list[Probe] = []

    def probe(variant: str, steps: list[Step], restart_at: int | None = None) -> None:
        out.append(Probe(api, version, variant, names, steps, restart_at=restart_at))

    if api == "Produce" and version >= 3:
        def batch(seq: int, transactional: bool = False) -> dict:
            return {"batch": {"values": ["s0", "s1", "s2"], "producer_id": "${init.producer_id}",
                              "producer_epoch": "${init.producer_epoch}", "base_sequence": seq,
                              "transactional": transactional, "timestamp": BATCH_TIMESTAMP}}

        def produce(id_: str, v: int, b: dict, txn: str | None, probed: bool = False) -> Step:
            body = valid_body("Produce", v, names, {"$batch": b})
            body["transactional_id"] = txn
            return Step(id_, "Produce", v, body, PROBE_RETRY if probed else SETUP_RETRY, probed=probed)

        for i, (variant, txn) in enumerate((("sequence-gap", False), ("duplicate-batch", False),
                                            ("partition-not-in-transaction", True))):
            names = names_for(first + i)
            setup, _ = _setup("Produce", versions, names)
            init = _step("init", "InitProducerId", versions, names, {},
                         transactional_id=names.txn if txn else None)
            steps = setup + [init]
            if variant == "sequence-gap":
                steps += [produce("first", versions["Produce"], batch(0), None),
                          produce("probe", version, batch(5), None, probed=True)]
            elif variant == "duplicate-batch":
                steps += [produce("first", versions["Produce"], batch(0), None),
                          produce("probe", version, batch(0), None, probed=True)]
            else:
                steps += [produce("probe", version, batch(0, transactional=True), names.txn, probed=True)]
            probe(variant, steps)
    if api in ("DescribeProducers", "DescribeTransactions"):
        # a transaction ended before the restart, and one ended after it (its markers carry the
        # coordinator epoch of the coordinator's new life)
        for i, (variant, ended_before) in enumerate((("after-restart", True), ("ended-after-restart", False))):
            names = names_for(first + i)
            setup, refs = _setup("EndTxn", versions, names)
            end = _step("end", "EndTxn", versions, names, refs)
            # the markers are written in the background: compare once the transaction completed
            settled = Step("settled", "DescribeTransactions", versions["DescribeTransactions"],
                           {"transactional_ids": [names.txn]}, SETUP_RETRY,
                           until=("transaction_states.0.transaction_state", COMPLETE), timeout_s=SETUP_TIMEOUT_S)
            body = valid_body(api, version, names, refs)
            steps = setup + [end, settled, Step("probe", api, version, body, SETUP_RETRY, probed=True,
                                                timeout_s=SETUP_TIMEOUT_S)]
            probe(variant, steps, restart_at=len(steps) - (2 if ended_before else 3))
    return out


#: Versions above these are for brokers only (AddPartitionsToTxn v4+ batches transactions for
#: the verification of KIP-890): a client never sends them.
CLIENT_MAX = {"AddPartitionsToTxn": 3}


def client_versions(ranges: list[dict[int, tuple[int, int]]]) -> dict[str, int]:
    """For each API every target (its ApiVersions ranges) and the codec speak: the highest
    version they share, which is what a client negotiates."""
    out = {}
    for name, api in API.items():
        hi = min(api.max_version, CLIENT_MAX.get(name, api.max_version))
        lo = api.min_version
        for r in ranges:
            if api.key not in r:
                break
            lo, hi = max(lo, r[api.key][0]), min(hi, r[api.key][1])
        else:
            if lo <= hi:
                out[name] = hi
    return out
