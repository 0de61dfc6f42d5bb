"""Creating and deleting topics, whoever asks: CreateTopics / DeleteTopics, Metadata's
auto-creation and the coordinators' internal topics (Kafka's ForwardingManager and
AutoTopicCreationManager).

A one-node broker decides itself (its TopicRegistry), as it always did; a broker of a cluster
forwards to the controller, which alone creates topics (placement, replication factor against
the alive brokers) -- the new topic reaches this broker with the next metadata image, so a
caller that needs its partitions waits for them (leaders appear a moment later, which clients
see as LEADER_NOT_AVAILABLE / COORDINATOR_NOT_AVAILABLE, as on Kafka).

Internal topics carry Kafka's settings: ``__consumer_offsets`` with
``offsets.topic.num.partitions`` / ``.replication.factor``, ``__transaction_state`` with
``transaction.state.log.num.partitions`` / ``.replication.factor`` and
``min.insync.replicas = transaction.state.log.min.isr``; a replication factor the cluster
cannot meet yet fails (the coordinator is then not available), as Kafka's does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from ..cluster.topic_admin import alter_broker_defaults, alter_topic_configs, new_partition_replicas
from ..cluster.topics import validate_topic_name
from ..coordinators.group_store import OFFSETS_TOPIC
from ..coordinators.transaction_log import TRANSACTION_STATE_TOPIC
from ..protocol.errors import Errors, KafkaError
from .broker_lifecycle import ControllerUnavailable


@dataclass
class TopicResult:
    error: Errors = Errors.NONE
    message: str | None = None
    topic_id: bytes = b"\x00" * 16
    num_partitions: int = -1
    replication_factor: int = -1


class TopicCreator:
    def __init__(self, broker):
        self.broker = broker

    def internal_topic_settings(self, name: str) -> tuple[int, int, dict[str, str]]:
        """(partitions, replication factor, configs) Kafka gives an internal topic."""
        cfg = self.broker.config
        if name == OFFSETS_TOPIC:
            return (cfg.int("offsets.topic.num.partitions"), cfg.int("offsets.topic.replication.factor"),
                    {"cleanup.policy": "compact"})
        if name == TRANSACTION_STATE_TOPIC:
            return (cfg.int("transaction.state.log.num.partitions"),
                    cfg.int("transaction.state.log.replication.factor"),
                    {"cleanup.policy": "compact", "compression.type": "uncompressed",
                     "min.insync.replicas": cfg.str("transaction.state.log.min.isr"),
                     "unclean.leader.election.enable": "false"})
        raise ValueError(f"{name} is not an internal topic")

    async def ensure_internal(self, name: str) -> Errors:
        """Create the internal topic ``name`` unless it exists: NONE when it does (now or
        before), else why not."""
        if self.broker.topics.get(name) is not None:
            return Errors.NONE
        partitions, rf, configs = self.internal_topic_settings(name)
        result = await self.create(name, partitions, rf, configs)
        if result.error in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
            return Errors.NONE
        return result.error

    async def create(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
                     validate_only: bool = False) -> TopicResult:
        """Create (or with ``validate_only`` only check) a topic; the caller has checked the
        request's own fields (configs, a positive replication factor)."""
        b = self.broker
        if not b.is_cluster:
            return self._create_here(name, num_partitions, replication_factor, configs, validate_only)
        try:
            r = await b.lifecycle.request("create_topics", validate_only=validate_only, topics=[{
                "name": name, "num_partitions": num_partitions, "replication_factor": replication_factor,
                "configs": configs}])
        except ControllerUnavailable as exc:
            return TopicResult(Errors.REQUEST_TIMED_OUT, f"The controller did not answer: {exc}")
        t = r["results"][0]
        if t["error"] != Errors.NONE:
            return TopicResult(Errors(t["error"]), t["message"])
        return TopicResult(Errors.NONE, None, bytes.fromhex(t["topic_id"]), t["num_partitions"],
                           t["replication_factor"])

    def _create_here(self, name, num_partitions, replication_factor, configs, validate_only) -> TopicResult:
        """The one-node broker: its own registry decides (the CreateTopics handler refused a
        replication factor above 1; internal topics ignore theirs)."""
        registry = self.broker.topics
        try:
            if registry.get(name) is not None:
                raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            if validate_only:
                validate_topic_name(name)
                if num_partitions <= 0:
                    raise KafkaError(Errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
                return TopicResult(Errors.NONE, None, uuid.uuid4().bytes, num_partitions, replication_factor)
            topic = registry.create(name, num_partitions, configs)
        except KafkaError as exc:
            return TopicResult(exc.error, exc.message)
        return TopicResult(Errors.NONE, None, topic.topic_id, num_partitions, replication_factor)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool = False) -> TopicResult:
        """CreatePartitions for one topic, decided by this broker alone or by the controller
        (the new partitions reach the brokers with the next metadata image)."""
        b = self.broker
        if b.is_cluster:
            return await self._ask("create_partitions", name=name, count=count, assignments=assignments,
                                   validate_only=validate_only)
        try:
            topic = b.topics.get(name)
            if topic is None:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, None)
            new_partition_replicas(name, len(topic.partitions), 1, count, assignments, [b.node_id], [b.node_id])
            if not validate_only:
                b.topics.add_partitions(name, count)
        except KafkaError as exc:
            return TopicResult(exc.error, exc.message)
        return TopicResult(Errors.NONE)

    async def alter_configs(self, name: str, ops: list[tuple[str, int, str | None]] | None,
                            replace: dict[str, str] | None, validate_only: bool = False) -> TopicResult:
        """(Incremental)AlterConfigs on a topic: ``ops`` (name, operation, value) or the whole
        new set ``replace``; in a cluster the controller decides and every broker applies it
        from the metadata image."""
        b = self.broker
        if b.is_cluster:
            return await self._ask("alter_configs", name=name, ops=ops, replace=replace, validate_only=validate_only)
        try:
            topic = b.topics.get(name)
            configs = alter_topic_configs(b.config, name, topic.configs if topic else {}, ops, replace)
            if topic is None:
                raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            if not validate_only and configs != topic.configs:
                b.topics.set_configs(name, configs)
        except KafkaError as exc:
            return TopicResult(exc.error, exc.message)
        return TopicResult(Errors.NONE)

    async def alter_broker_defaults(self, ops: list[tuple[str, int, str | None]],
                                    validate_only: bool = False) -> TopicResult:
        """IncrementalAlterConfigs on the BROKER resource "" (the cluster-wide defaults)."""
        b = self.broker
        if b.is_cluster:
            return await self._ask("alter_broker_defaults", ops=ops, validate_only=validate_only)
        try:
            new = alter_broker_defaults(b.static_configs, b.dynamic_configs, ops)
        except KafkaError as exc:
            return TopicResult(exc.error, exc.message)
        if not validate_only and new != b.dynamic_configs:
            b.save_dynamic_configs(new)
        return TopicResult(Errors.NONE)

    async def _ask(self, op: str, **fields) -> TopicResult:
        try:
            r = await self.broker.lifecycle.request(op, **fields)
        except ControllerUnavailable as exc:
            return TopicResult(Errors.REQUEST_TIMED_OUT, f"The controller did not answer: {exc}")
        return TopicResult(Errors(r["error"]), r.get("message"))

    async def delete(self, name: str) -> TopicResult:
        b = self.broker
        if not b.is_cluster:
            try:
                topic = b.topics.delete(name)
            except KafkaError as exc:
                return TopicResult(exc.error, exc.message)
            b.group_coordinator.on_topics_deleted({name})
            b.notify_append()   # fetches held in long poll on it are answered (a cluster's image does the same)
            return TopicResult(Errors.NONE, None, topic.topic_id)
        try:
            r = await b.lifecycle.request("delete_topics", names=[name])
        except ControllerUnavailable as exc:
            return TopicResult(Errors.REQUEST_TIMED_OUT, f"The controller did not answer: {exc}")
        t = r["results"][0]
        if t["error"] != Errors.NONE:
            return TopicResult(Errors(t["error"]), t["message"])
        return TopicResult(Errors.NONE, None, bytes.fromhex(t["topic_id"]))
