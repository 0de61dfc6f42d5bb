"""Topics and partitions this broker hosts, and their durable registry.

Real Kafka keeps topic metadata in the KRaft metadata log; the embedded
broker is a single node, so one JSON file (``topics.json``, replaced
atomically) is enough for it to know its topics, their ids and configs
after a restart. Partition data lives in ``<data-dir>/<topic>-<n>/``, as in
Kafka.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.errors import Errors, KafkaError
from .durable_file import replace_durably

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``: INVALID_TOPIC_EXCEPTION with the reason."""
    if not name:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.match(name):
        raise KafkaError(Errors.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def by_topic(partitions) -> dict[str, list[int]]:
    """``{topic: [partition, ...]}`` of ``(topic, partition)`` pairs, in the order given (pass
    them sorted for the layout Kafka writes and answers with)."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


@dataclass
class Partition:
    topic: str
    index: int
    log: object                 # broker_impl.log.PartitionLog
    leader_epoch: int = 0

    def check_current_leader_epoch(self, current: int):
        """Kafka's Partition.checkCurrentLeaderEpoch: a request naming the leader epoch it
        expects (-1: any) gets FENCED_LEADER_EPOCH when that epoch is older than ours and
        UNKNOWN_LEADER_EPOCH when newer; None when it may go on."""
        if current == -1 or current == self.leader_epoch:
            return None
        return Errors.FENCED_LEADER_EPOCH if current < self.leader_epoch else Errors.UNKNOWN_LEADER_EPOCH


@dataclass
class Topic:
    name: str
    topic_id: bytes              # 16-byte UUID
    configs: dict[str, str]
    partitions: list[Partition] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicRegistry:
    """Creates, deletes and remembers topics; opens their partition logs."""

    def __init__(self, data_dir: Path, log_factory):
        self.data_dir = data_dir
        self.log_factory = log_factory   # (directory, topic_configs) -> PartitionLog
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[bytes, Topic] = {}
        self._file = data_dir / "topics.json"

    # -- persistence -------------------------------------------------------
    def load(self) -> None:
        if not self._file.exists():
            return
        for t in json.loads(self._file.read_text()):
            self._open(t["name"], bytes.fromhex(t["id"]), t["partitions"], t["configs"])

    def _save(self) -> None:
        data = [{"name": t.name, "id": t.topic_id.hex(), "partitions": len(t.partitions), "configs": t.configs}
                for t in self.topics.values()]
        replace_durably(self._file, json.dumps(data, indent=1))

    def _open(self, name: str, topic_id: bytes, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, topic_id, dict(configs))
        for i in range(partitions):
            d = self.data_dir / f"{name}-{i}"
            topic.partitions.append(Partition(name, i, self.log_factory(d, topic.configs)))
        self.topics[name] = topic
        self.by_id[topic_id] = topic
        return topic

    # -- operations --------------------------------------------------------
    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise KafkaError(Errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        topic = self._open(name, uuid.uuid4().bytes, partitions, configs or {})
        self._save()
        return topic

    def delete(self, name: str) -> Topic:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.by_id.pop(topic.topic_id, None)
        self._save()
        for p in topic.partitions:
            p.log.close()
            shutil.rmtree(p.log.directory, ignore_errors=True)
        return topic

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def partition(self, name: str, index: int) -> Partition | None:
        t = self.topics.get(name)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def close(self) -> None:
        for t in self.topics.values():
            for p in t.partitions:
                p.log.close()
