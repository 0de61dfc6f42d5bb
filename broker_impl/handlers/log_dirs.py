"""DescribeLogDirs (35): the log directory of this broker and the partitions it holds there, as
Kafka's KafkaApis.handleDescribeLogDirsRequest and ReplicaManager.describeLogDirs answer.

Why a broker of a conformance suite has it: Kafka's admin tools (kafka-log-dirs.sh,
Admin.describeLogDirs / describeReplicaLogDirs) and the operators of Streams and Connect
clusters read partition sizes with it, and a size is where a broker that writes more or fewer
bytes than Kafka (an extra marker, a batch rewritten) shows.

The embedded broker has one log directory, its data directory (Kafka: every entry of
``log.dirs``, absolute). Rules, Kafka's:
- DESCRIBE on the cluster, else no results and CLUSTER_AUTHORIZATION_FAILED (the top-level
  error exists from v3; v1-2 clients see an empty list).
- ``topics`` null: every partition this broker holds a replica of (leader or follower);
  otherwise the named partitions this broker holds -- one it does not hold, or of a topic that
  does not exist, is left out without an error, and a topic left with no partition is left out.
- per partition: the size of its segments in bytes, the offset lag ``max(HW - LEO, 0)`` (0 for
  a current log; this broker never has a future log, AlterReplicaLogDirs being absent), and
  ``is_future_key`` false.
- v4+: the volume's total and usable bytes (statvfs); v5: ``is_cordoned`` false -- a log
  directory is cordoned only by ``cordoned.log.dirs`` (KIP-1066), which the embedded broker
  does not have.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from . import handles
from ..cluster.authorizer import AclOperation as Op, allowed_cluster
from ..protocol.errors import Errors

if TYPE_CHECKING:
    from ..server.broker import Broker


def _volume_bytes(path: str) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``: Java's FileStore.getTotalSpace
    and getUsableSpace (what an unprivileged process may still write)."""
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def local_logs(broker: Broker):
    """(topic, partition index, PartitionLog) of every replica this broker holds."""
    for topic in list(broker.topics.topics.values()):
        for part in topic.partitions:
            if part.log is not None:
                yield topic.name, part.index, part.log


@handles("DescribeLogDirs")
async def handle_describe_log_dirs(broker: Broker, ctx, req):
    R = ctx.api.Response
    if not allowed_cluster(broker, ctx, Op.DESCRIBE):
        return R(throttle_time_ms=0, error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, results=[])
    Result = R.DescribeLogDirsResult
    T = Result.DescribeLogDirsTopic
    P = T.DescribeLogDirsPartition
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    by_topic: dict[str, list] = {}
    for name, index, log in local_logs(broker):
        if wanted is not None and (name, index) not in wanted:
            continue
        by_topic.setdefault(name, []).append(P(
            partition_index=index, partition_size=log.size_in_bytes,
            offset_lag=max(log.high_watermark - log.log_end_offset, 0), is_future_key=False))
    log_dir = str(broker.data_dir.resolve())
    total, usable = _volume_bytes(log_dir)
    result = Result(error_code=Errors.NONE, log_dir=log_dir,
                    topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()],
                    total_bytes=total, usable_bytes=usable, is_cordoned=False)
    return R(throttle_time_ms=0, error_code=Errors.NONE, results=[result])
