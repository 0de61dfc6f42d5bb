"""The end-of-case observations: what consumers read, where the offsets stand, which group
offsets are committed.

Why a separate observer process: the case's own actors may be crashed, fenced or mid-
transaction at the end; the observer is a fresh driver of the run's client, so the reads are
that client's read_committed / read_uncommitted view of the partitions (a client that filters
aborted records wrongly shows up here as well as a broker that sends them).

Reading "everything" without waiting a fixed time: the target first answers ListOffsets for the
end of each partition (the high watermark for read_uncommitted, the last stable offset for
read_committed: broker facts, asked of each partition's leader over the wire, Target.end_offsets
-- a client's admin API adds nothing but its own start-up, e.g. librdkafka's AdminClient waits
seconds for a broker connection after bootstrap: docs/measurements.md), then the observer polls until its position
reaches that end on every partition (control records are never delivered, but clients move
their position past them), and stops after 1.5 s of empty polls in a row otherwise. Everything is
bounded by `observe.timeout_ms`, counted from when the observer's driver is up (a JVM that takes
10 s to start on a loaded machine used to spend the whole budget before its first Fetch). A read
that the deadline cuts short before its positions reach the ends is an observation error, never
an empty read (apache-kafka@3.9.1/java flink/downtime_exceeds_timeout once "read nothing" so).
The observer's consumers are closed without waiting: they read
by assignment, with nothing to commit and no group to leave (the Java client's close otherwise
takes most of a second each: docs/measurements.md).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conformance.clients import ClientProcess
from conformance.targets import Target

from ..dsl.model import Case
from .namespace import Namespace

#: One poll's window: short, because a poll returns only when it is over (or max_records came),
#: and the observer stops as soon as its positions reach the ends.
POLL_MS = 100
#: How long the ends may take to settle (markers in flight), see _ends.
SETTLE_MS = 1500
#: When the ends are known (unknown), stop after this much time of empty polls in a row.
EMPTY_MS, EMPTY_MS_NO_ENDS = 1500, 750


def observe(case: Case, client: str, target: Target, bootstrap: str, ns: Namespace, logdir: Path) -> dict[str, Any]:
    """{"reads": {iso: {"topic-p": [{offset,key,value}]}}, "offsets": {"topic-p": {...}},
    "group_offsets": {group: {"topic-p": offset|None}}, "observe_errors": [...]} in unique names."""
    topics = case.observe.topics or tuple(t.name for t in case.topology.topics)
    parts = {t.name: t.partitions for t in case.topology.topics}
    tps = [{"topic": ns.name(t), "partition": p} for t in topics for p in range(parts[t])]
    errors: list[str] = []
    out: dict[str, Any] = {"reads": {}, "offsets": {}, "group_offsets": {}}
    if not tps and not case.observe.groups:
        return out
    proc = ClientProcess(client, label="observer", stderr_path=logdir / f"observer.{client}.log")
    try:
        proc.start()
        deadline = time.monotonic() + case.observe.timeout_ms / 1000
        ends = _ends(target, tps, deadline, errors) if tps else {}
        starts = _starts(target, tps, deadline) if tps else {}
        for iso, label in (("read_uncommitted", "high_watermark"), ("read_committed", "last_stable")):
            for key, offset in ends.get(iso, {}).items():
                out["offsets"].setdefault(key, {})[label] = offset
        for iso in case.observe.isolation:
            if not tps:
                break
            out["reads"][iso] = _read_all(proc, iso, tps, bootstrap, ends.get(iso, {}), starts, deadline, errors)
        for group in case.observe.groups:
            out["group_offsets"][ns.name(group)] = _committed(proc, ns.name(group), tps, bootstrap, errors)
    finally:
        proc.kill()
    if errors:
        out["observe_errors"] = errors
    return out


def _ends(target: Target, tps: list[dict], deadline: float, errors: list[str]) -> dict[str, dict[str, int]]:
    """{isolation: {"topic-p": end}}: the high watermark and the last stable offset. A commit's
    or abort's markers are written after EndTxn is answered (Kafka sends them over the network):
    while some partition's LSO is below its high watermark the ends are asked again, up to
    SETTLE_MS, so the observation is what the case left behind, not a marker still in flight.
    An LSO held by a transaction the case left open stays below, and is observed so. An LSO
    above the high watermark is two moments, not one (the high watermark moved between the two
    questions -- seen while a new leader's followers were still acknowledging a marker): asked
    again too."""
    parts = [(tp["topic"], tp["partition"]) for tp in tps]
    settle = time.monotonic() + SETTLE_MS / 1000
    while True:
        ends: dict[str, dict[str, int]] = {}
        for iso in ("read_uncommitted", "read_committed"):
            try:
                found = target.end_offsets(parts, iso == "read_committed", timeout=max(1.0, deadline - time.monotonic()))
            except (RuntimeError, TimeoutError, OSError, KeyError) as exc:  # KeyError: no such topic
                errors.append(f"list_offsets({iso}): {exc}")
                return ends
            ends[iso] = {f"{t}-{p}": offset for (t, p), offset in sorted(found.items())}
        held = any(ends["read_committed"].get(k, -1) != hw for k, hw in ends["read_uncommitted"].items())
        if not held or time.monotonic() >= min(settle, deadline):
            return ends
        time.sleep(0.1)


def _starts(target: Target, tps: list[dict], deadline: float) -> dict[str, int]:
    """{"topic-p": log start offset}: where a read of the whole partition begins. Reading from
    offset 0 of a partition whose start moved (DeleteRecords, retention) is OFFSET_OUT_OF_RANGE,
    which not every client resets by auto.offset.reset for an explicitly assigned offset
    (franz-go, Sarama and KafkaJS read nothing: cases/cluster/delete_records_on_every_replica).
    Unknown (an error): 0, as before."""
    try:
        found = target.start_offsets([(tp["topic"], tp["partition"]) for tp in tps],
                                     timeout=max(1.0, deadline - time.monotonic()))
    except (RuntimeError, TimeoutError, OSError, KeyError):
        return {}
    return {f"{t}-{p}": offset for (t, p), offset in found.items()}


def _read_all(proc: ClientProcess, iso: str, tps: list[dict], bootstrap: str, ends: dict[str, int],
              starts: dict[str, int], deadline: float, errors: list[str]) -> dict[str, list[dict]]:
    reads: dict[str, list[dict]] = {f"{tp['topic']}-{tp['partition']}": [] for tp in tps}
    r = proc.call("create_consumer", 15_000, config={
        "bootstrap.servers": bootstrap, "group.id": f"kconform-observer-{iso}", "isolation.level": iso,
        "enable.auto.commit": "false", "auto.offset.reset": "earliest"})
    if not r.ok:
        errors.append(f"create_consumer({iso}): {r.error.name}: {r.error.message}")
        return reads
    try:
        r = proc.call("assign", 15_000, partitions=[dict(tp, offset=starts.get(f"{tp['topic']}-{tp['partition']}", 0))
                                                    for tp in tps])
        if not r.ok:
            errors.append(f"assign({iso}): {r.error.name}: {r.error.message}")
            return reads
        last: dict[str, int] = {}
        empty = 0
        while True:
            if time.monotonic() >= deadline:
                if ends and not (all(last.get(k, -1) + 1 >= end for k, end in ends.items())
                                 or _positions_reached(proc, ends)):
                    errors.append(f"read({iso}): the observation deadline passed before the positions reached "
                                  f"the ends {ends} (read up to {last})")
                break
            r = proc.call("poll", 10_000, max_records=1000, timeout_ms=POLL_MS)
            if not r.ok:
                errors.append(f"poll({iso}): {r.error.name}: {r.error.message}")
                break
            records = r.data.get("records", [])
            for rec in records:
                key = f"{rec['topic']}-{rec['partition']}"
                reads.setdefault(key, []).append(
                    {"offset": rec["offset"], "key": rec.get("key"), "value": rec.get("value")})
                last[key] = rec["offset"]
            empty = 0 if records else empty + 1
            if ends and all(last.get(k, -1) + 1 >= end for k, end in ends.items()):
                break
            if ends and _positions_reached(proc, ends):
                break
            if empty * POLL_MS >= (EMPTY_MS if ends else EMPTY_MS_NO_ENDS):
                break
    finally:
        proc.call("close", 10_000, which="consumer", timeout_ms=0)
    return reads


def _positions_reached(proc: ClientProcess, ends: dict[str, int]) -> bool:
    r = proc.call("position", 10_000)
    if not r.ok:
        return False  # cannot tell: the empty-poll bound decides
    pos = {f"{p['topic']}-{p['partition']}": p.get("offset") for p in r.data.get("positions", [])}
    for key, end in ends.items():
        p = pos.get(key)
        if p is None or p < 0:
            # no position yet: nothing was fetched -- only fine for an empty partition
            if end > 0:
                return False
            continue
        if p < end:
            return False
    return True


def _committed(proc: ClientProcess, group: str, tps: list[dict], bootstrap: str, errors: list[str]) -> dict:
    r = proc.call("create_consumer", 15_000, config={
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": "false",
        "isolation.level": "read_committed"})
    if not r.ok:
        errors.append(f"create_consumer(group {group}): {r.error.name}")
        return {}
    try:
        r = proc.call("committed", 15_000, partitions=tps)
        if not r.ok:
            errors.append(f"committed({group}): {r.error.name}: {r.error.message}")
            return {}
        return {f"{o['topic']}-{o['partition']}": o.get("offset") for o in r.data.get("offsets", [])}
    finally:
        proc.call("close", 10_000, which="consumer", timeout_ms=0)
