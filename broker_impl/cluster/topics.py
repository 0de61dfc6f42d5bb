"""Topics and partitions this broker knows, and where their logs are.

Two ways to know them. A one-node broker is its own controller: one JSON file
(``topics.json``, replaced atomically) is enough for it to know its topics, their ids and
configs after a restart. A broker of a cluster learns them from the controller's metadata
image (Kafka keeps them in the KRaft metadata log): the replica manager puts every topic of the
image here (``put``/``drop``) and opens the logs of the partitions this broker replicates
(``open_log``), each with Kafka's ``partition.metadata`` naming its topic id, so a log of a
deleted topic is never taken for the log of a new one with the same name. Partition data lives
in ``<data-dir>/<topic>-<n>/``, as in Kafka.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..log.config import LogConfig
from ..protocol.errors import Errors, KafkaError
from .durable_file import replace_durably
from .metadata_image import NO_LEADER
from .partition import Partition

_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: Kafka's Topic.isInternal names (this broker has no share groups, hence no such topic of its own)
KAFKA_INTERNAL_TOPICS = INTERNAL_TOPICS | {"__share_group_state"}


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


PARTITION_METADATA_FILE = "partition.metadata"


def topic_id_string(topic_id: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(topic_id).decode().rstrip("=")


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

    def __init__(self, data_dir: Path, log_factory, new_partition=None, creates_topics: bool = True,
                 log_config=None):
        self.data_dir = data_dir
        #: a topic's configs -> the map its logs' LogConfig is read from (the broker's defaults under them)
        self.log_config = log_config or (lambda configs: configs)
        #: False on a broker of a cluster: only the controller creates and deletes topics
        self.creates_topics = creates_topics
        self.log_factory = log_factory   # (directory, topic_configs) -> PartitionLog
        #: (topic name, index, log or None) -> Partition
        self.new_partition = new_partition or (lambda name, index, log: Partition(name, index, log))
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[bytes, Topic] = {}
        self._file = data_dir / "topics.json"

    # -- persistence -------------------------------------------------------
    def load(self) -> None:
        """Open every topic of ``topics.json``; a partition it led is fenced (leaderless)
        until :meth:`unfence` elects this broker again."""
        if not self._file.exists():
            return
        for t in json.loads(self._file.read_text()):
            topic = self._open(t["name"], bytes.fromhex(t["id"]), t["partitions"], t["configs"])
            epochs = t.get("leader_epochs") or []
            for i, p in enumerate(topic.partitions):
                p.fence_after_restart(epochs[i] if i < len(epochs) else 0)

    def _record(self) -> str:
        """``topics.json``: topics, ids, configs and, per partition, the epoch it is led at --
        for a fenced one the epoch :meth:`unfence` leads it at, so that the next start moves on
        from there."""
        data = [{"name": t.name, "id": t.topic_id.hex(), "partitions": len(t.partitions), "configs": t.configs,
                 "leader_epochs": [p.leader_epoch + 1 if p.leader == NO_LEADER and not p.replicated
                                   else max(p.leader_epoch, 0) for p in t.partitions]}
                for t in self.topics.values()]
        return json.dumps(data, indent=1)

    def _save(self) -> None:
        replace_durably(self._file, self._record())

    def _partitions(self):
        for t in list(self.topics.values()):
            yield from t.partitions

    async def unfence(self) -> None:
        """A one-node broker's controller unfences it: first the record of the epochs its
        partitions are led at, durably and off the event loop (Kafka's controller commits the
        election to its metadata log while the broker already serves), then every fenced
        partition is led again. Requests meanwhile are answered as Kafka's are while its
        broker catches up: NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE."""
        text = self._record()
        await trio.to_thread.run_sync(replace_durably, self._file, text)
        self._lead_again()

    def unfence_now(self) -> None:
        """The same at once, on the event loop (no client is connected yet)."""
        self._save()
        self._lead_again()

    def _lead_again(self) -> None:
        for p in self._partitions():
            p.lead_again_after_restart()

    def resign_for_shutdown(self) -> None:
        """Controlled shutdown of a one-node broker: every partition leaderless."""
        for p in self._partitions():
            p.resign_for_shutdown()

    def _open(self, name: str, topic_id: bytes, partitions: int, configs: dict[str, str]) -> Topic:
        topic = Topic(name, topic_id, dict(configs))
        for i in range(partitions):
            d = self.data_dir / f"{name}-{i}"
            topic.partitions.append(self.new_partition(name, i, self.log_factory(d, topic.configs)))
        self.topics[name] = topic
        self.by_id[topic_id] = topic
        return topic

    # -- operations --------------------------------------------------------
    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        if not self.creates_topics:
            raise KafkaError(Errors.NOT_CONTROLLER, f"Topic '{name}' is created by the controller of this cluster.")
        validate_topic_name(name)
        if name in self.topics:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise KafkaError(Errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        topic = self._open(name, uuid.uuid4().bytes, partitions, configs or {})
        self._save()
        return topic

    def add_partitions(self, name: str, count: int) -> Topic:
        """CreatePartitions on a one-node broker: the topic grows to ``count`` partitions, their
        logs opened and led here at epoch 0 as a new topic's."""
        topic = self.topics[name]
        for i in range(len(topic.partitions), count):
            d = self.data_dir / f"{name}-{i}"
            topic.partitions.append(self.new_partition(name, i, self.log_factory(d, topic.configs)))
        self._save()
        return topic

    def set_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """A one-node broker's AlterConfigs: the topic's own configs replaced and saved."""
        topic = self.topics[name]
        self.reconfigure(topic, configs)
        self._save()
        return topic

    def reconfigure(self, topic: Topic, configs: dict[str, str]) -> None:
        """The topic's configs take effect at once on every log of it this broker has (Kafka's
        TopicConfigHandler: the next append, fetch and retention pass obey them)."""
        topic.configs = dict(configs)
        config = LogConfig.from_dict(self.log_config(topic.configs))   # one for all its logs (frozen)
        for p in topic.partitions:
            if p.log is not None:
                p.log.config = config

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

    # -- a cluster's topics (the controller's image) ----------------------------
    def put(self, name: str, topic_id: bytes, configs: dict[str, str], partitions: int) -> Topic:
        """The topic as the image has it (no log opened, nothing written): a new one, or the
        known one with the image's configs and at least ``partitions`` partitions."""
        topic = self.topics.get(name)
        if topic is not None and topic.topic_id != topic_id:
            self.drop(name)
            topic = None
        if topic is None:
            topic = Topic(name, topic_id, dict(configs))
            self.topics[name] = topic
            self.by_id[topic_id] = topic
        if topic.configs != configs:
            self.reconfigure(topic, configs)
        while len(topic.partitions) < partitions:
            topic.partitions.append(self.new_partition(name, len(topic.partitions), None))
        return topic

    def open_log(self, topic: Topic, index: int):
        """The log of a partition this broker replicates, opened (created if new) in
        ``<data-dir>/<topic>-<index>``; a directory left by an earlier topic of the same name
        (another topic id in ``partition.metadata``) is deleted first."""
        d = self.data_dir / f"{topic.name}-{index}"
        meta = d / PARTITION_METADATA_FILE
        wanted = f"version: 0\ntopic_id: {topic_id_string(topic.topic_id)}\n"
        if meta.exists() and meta.read_text() != wanted:
            shutil.rmtree(d, ignore_errors=True)
        log = self.log_factory(d, topic.configs)
        if not meta.exists():
            replace_durably(meta, wanted)
        return log

    def drop(self, name: str) -> Topic | None:
        """A topic the image no longer has: its logs are closed and deleted."""
        topic = self.topics.pop(name, None)
        if topic is None:
            return None
        self.by_id.pop(topic.topic_id, None)
        for p in topic.partitions:
            if p.log is not None:
                p.log.close()
                shutil.rmtree(p.log.directory, ignore_errors=True)
                p.log = None
            p.stop_leading()
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
                if p.log is not None:
                    p.log.close()
