"""Differences from Apache Kafka that are intended, each with its reason (docs/wirediff.md).

A difference `kconform diff` finds is *explained* when an entry here matches it: the target
(fnmatch pattern), the probed API (None: any), a regular expression searched in the probe's
variant and one searched in the difference's path (`step(Api vN).response.field...`), and,
where given, what the target answered (`MISSING`: the target has no such element). Explained
differences stay in the results (the row's `diff`, with the reason); they do not fail the probe.

Two kinds: what the embedded broker does not implement (an API, a feature) and where Apache
Kafka 4.3.1 itself fails on a request (an internal error, no answer at all), which the embedded
broker does not copy.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from ..compare import MISSING

ANY = object()


@dataclass(frozen=True)
class Known:
    targets: str           # fnmatch pattern of target names
    api: str | tuple[str, ...] | None  # the probed API(s) (None: any)
    variant: str           # regular expression searched in the probe's variant
    path: str              # regular expression searched in the difference's path
    reason: str
    actual: object = ANY   # the target's value must be this (ANY: whatever it is)

    def matches(self, target: str, api: str, variant: str, diff: dict) -> bool:
        apis = (self.api,) if isinstance(self.api, str) else self.api
        return (fnmatch.fnmatch(target, self.targets) and (apis is None or api in apis)
                and re.search(self.variant, variant) is not None and re.search(self.path, diff["path"]) is not None
                and (self.actual is ANY or diff["actual"] == self.actual))


EMBEDDED = "embedded"
#: A topic (or a marker) whose list of partitions is empty.
EMPTY_NESTED = r"^empty:[a-z_0-9.]+\.(partitions|partition_data|partition_indexes|topics)$"
PER_PARTITION = ("Produce", "Fetch", "ListOffsets", "OffsetCommit", "OffsetDelete", "WriteTxnMarkers",
                 "AddPartitionsToTxn", "DeleteRecords")

KNOWN: tuple[Known, ...] = (
    # ---------------------------------------------------------------- not implemented
    Known(EMBEDDED, "ApiVersions", "", r"\.response\.api_keys\.api_key=\d+$",
          "the embedded broker implements a subset of Kafka's APIs (docs/broker.md) and advertises only "
          "those; every API it advertises is compared here, at every version", actual=MISSING),
    Known(EMBEDDED, "ApiVersions", "",
          r"\.response\.(supported|finalized)_features\.name=(?!(transaction|group)\.version$)",
          "the embedded broker has no KRaft metadata log (metadata.version, kraft.version), no share or "
          "streams groups and no eligible leader replicas: it advertises the features it implements, "
          "transaction.version and group.version (KIP-848 consumer groups)", actual=MISSING),
    Known(EMBEDDED, "ApiVersions", "", r"ApiVersions v3\)\.response\.supported_features$",
          "before v4 Kafka lists only the features whose lowest level is above 0, which of Kafka's is "
          "metadata.version alone; the embedded broker has no metadata.version (see above)"),
    # ---------------------------------------------------------------- request shapes no client sends
    Known(EMBEDDED, PER_PARTITION, EMPTY_NESTED, r"",
          "a topic (or a WriteTxnMarkers marker) with an empty list of partitions: Kafka builds these "
          "responses partition by partition, so such a topic is left out (AddPartitionsToTxn v0-3 is the "
          "other way round: Kafka lists it with no results); the embedded broker answers the topic with an "
          "empty list. No client sends such a request"),
    # ---------------------------------------------------------------- Kafka fails on the request
    Known(EMBEDDED, "Produce", r"^null:topic_data\.partition_data\.records$", r"",
          "null records: Kafka 4.3.1 throws a NullPointerException while logging its error for the request "
          "(ProduceRequest.partitionSizes) and never answers -- the connection stays muted; the embedded "
          "broker closes the connection as for a malformed request"),
    Known(EMBEDDED, "AddPartitionsToTxn", r"^empty:transactions$", r"",
          "AddPartitionsToTxn v4+ (broker to broker) with no transaction: Kafka 4.3.1 never answers; the "
          "embedded broker answers with no results"),
    Known(EMBEDDED, "WriteTxnMarkers", r"^-1:markers\.producer_(id|epoch)$", r"\.error_code$",
          "a marker for producer id or epoch -1: Kafka 4.3.1 fails with UNKNOWN_SERVER_ERROR (an internal "
          "error); the embedded broker writes the marker (id -1) or fences it (epoch -1: "
          "INVALID_PRODUCER_EPOCH). Only brokers send WriteTxnMarkers"),
    Known(EMBEDDED, "Metadata", r"^null:topics\.name$", r"Metadata v1[23]\)",
          "a topic with neither a name nor an id (v12+): Kafka 4.3.1 fails the whole request with "
          "UNKNOWN_SERVER_ERROR (an internal error); the embedded broker answers that topic "
          "UNKNOWN_TOPIC_ID"),
    # ---------------------------------------------------------------- what the coordinators wrote
    Known(EMBEDDED, "DescribeLogDirs", "", r"topics\.name=__consumer_offsets\.partitions\..*\.partition_size$",
          "the size of a __consumer_offsets partition is what the group coordinator wrote there during the "
          "run, record layouts and contents alike: the embedded broker writes Kafka's group records in "
          "their version-0 layouts, without the fields 4.x added (docs/groups.md); measured a few hundred "
          "bytes fewer per partition after a whole diff run. Data topics' sizes are compared"),
)


def explain(target: str, probe, diff: dict) -> str | None:
    """The reason of the first entry matching this difference of `probe` on `target`; None."""
    for k in KNOWN:
        if k.matches(target, probe.api, probe.variant, diff):
            return k.reason
    return None
