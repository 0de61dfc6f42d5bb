"""CreateTopics through confluent-kafka's AdminClient.

Why librdkafka here: creating topics is an ordinary admin operation that a real client performs,
so the target uses a real client for it. Metadata questions (leaders, replicas, ISR) are asked
with the project's own codec in wire.py, the same way for every role.
"""
from __future__ import annotations

import logging

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .. import security
from .topology import TopicSpec

#: librdkafka logs connection failures loudly while nodes are down or starting; route them
#: to a logger (silent unless the harness configures logging) instead of stderr.
_librdkafka_log = logging.getLogger("kconform.targets.librdkafka")


def admin_client(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "logger": _librdkafka_log,
                        **security.current().librdkafka_config()})


def create_topics(bootstrap: str, topics: list[TopicSpec], nodes: int, timeout: float) -> None:
    """Create every topic; one that already exists with the same partition count is accepted.

    replication_factor None becomes min(nodes, 3).
    """
    admin = admin_client(bootstrap)
    new = [
        NewTopic(
            t.name,
            num_partitions=t.partitions,
            replication_factor=t.replication_factor or min(nodes, 3),
            config=dict(t.configs),
        )
        for t in topics
    ]
    futures = admin.create_topics(new, operation_timeout=timeout, request_timeout=timeout)
    existing = []
    for name, fut in futures.items():
        try:
            fut.result(timeout=timeout + 5)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"CreateTopics {name!r} failed: {err.name()}: {err.str()}") from exc
            existing.append(name)
    if existing:
        md = admin.list_topics(timeout=timeout)
        for t in topics:
            if t.name in existing and len(md.topics[t.name].partitions) != t.partitions:
                raise RuntimeError(
                    f"topic {t.name!r} already exists with "
                    f"{len(md.topics[t.name].partitions)} partitions, the case needs {t.partitions}"
                )
