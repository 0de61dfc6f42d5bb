"""The controller of an embedded cluster: the one owner of the cluster's metadata (Kafka's
QuorumController with its ClusterControlManager, ReplicationControlManager and
ProducerIdControlManager, reduced to one decision maker).

What it decides, as KRaft's controller does:
- brokers: a registration (a new incarnation) starts fenced; a heartbeat from a broker that has
  applied the metadata up to its registration unfences it; a broker without a heartbeat for
  ``broker.session.timeout.ms`` is fenced; a registration with a new incarnation fences the old
  one first (a restart within the session timeout); controlled shutdown takes a broker out of
  every ISR and leadership before it stops.
- partitions: replicas placed round-robin over the alive brokers; the leader is the first
  alive replica in the ISR (the current one stays while it qualifies); a fenced broker leaves
  every ISR, except the last member, which stays (the partition is then leaderless until it
  returns); when no ISR member can lead, an out-of-sync alive replica is elected only when
  ``unclean.leader.election.enable`` (topic config, else broker config) says so, and it becomes
  the whole ISR. A new leader bumps the leader epoch; any change bumps the partition epoch.
- AlterPartition: the leader's ISR changes, refused with FENCED_LEADER_EPOCH /
  INVALID_UPDATE_VERSION when it names an old leader or partition epoch, INELIGIBLE_REPLICA for a
  fenced broker, STALE_BROKER_EPOCH for an old incarnation.
- producer ids: blocks of 1000 per request (AllocateProducerIds), never reused.

Quorum: with a dedicated controller (``quorum_nodes`` empty) this process alone is the quorum.
In a combined topology the quorum lives on the nodes themselves (Kafka's
``process.roles=broker,controller``): the controller then decides nothing while fewer than a
majority of those nodes have a live session -- as a Raft quorum that lost its majority, it
freezes leader elections, ISR changes and registrations (REQUEST_TIMED_OUT).

Every change is one step of the metadata log: the image's offset moves on, the image is written
durably (``metadata_image.json``, replaced atomically) and handed to every listener (the server
pushes it to the brokers). This module does no I/O besides that file: the server
(server/controller_server.py) owns sockets and time.
"""

from __future__ import annotations

import json
import sys
import logging
import uuid
from pathlib import Path
from typing import Callable

from ..config import BrokerConfig
from ..protocol.errors import Errors, KafkaError
from .durable_file import replace_durably
from .authorizer import AclBinding, AclBindingFilter, StandardAuthorizer, binding_dict, binding_from_dict
from .scram import ScramCredentials
from .metadata_image import NO_LEADER, BrokerRegistration, MetadataImage, PartitionRegistration, TopicImage
from .topic_admin import alter_broker_defaults, alter_topic_configs, new_partition_replicas
from .topics import validate_topic_name

log = logging.getLogger("kconform.controller")

PRODUCER_ID_BLOCK_SIZE = 1000
IMAGE_FILE = "metadata_image.json"


class QuorumController:
    def __init__(self, config: BrokerConfig, data_dir: Path, quorum_nodes: frozenset[int] = frozenset()):
        self.config = config
        self.session_timeout_s = config.int("broker.session.timeout.ms") / 1000.0
        self.quorum_nodes = frozenset(quorum_nodes)
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._file = self.data_dir / IMAGE_FILE
        self.image = MetadataImage()
        if self._file.exists():
            self.image = MetadataImage.from_dict(json.loads(self._file.read_text()))
        #: the controller's static configs, under the cluster-wide dynamic ones of the image
        self.static_configs = dict(config.values)
        config.values.update(self.image.broker_defaults)
        #: broker id -> (monotonic) time of its last registration or heartbeat
        self.last_contact: dict[int, float] = {}
        #: broker id -> the metadata offset that moved its leaderships away (controlled shutdown)
        self.shutdown_offsets: dict[int, int] = {}
        #: broker id -> the metadata offset its last heartbeat reported (BrokerHeartbeatManager's)
        self.metadata_offsets: dict[int, int] = {}
        self.listeners: list[Callable[[MetadataImage], None]] = []
        self._next_placement = 0

    # ================================================================== the log
    def _commit(self, why: str) -> None:
        self.image.offset += 1
        replace_durably(self._file, json.dumps(self.image.to_dict()))
        log.debug("metadata offset %d: %s", self.image.offset, why)
        for listener in self.listeners:
            listener(self.image)

    def has_quorum(self, now: float) -> bool:
        if not self.quorum_nodes:
            return True
        live = sum(1 for n in self.quorum_nodes if now - self.last_contact.get(n, float("-inf")) <= self.session_timeout_s)
        return 2 * live > len(self.quorum_nodes)

    # ================================================================== brokers
    def register_broker(self, broker_id: int, incarnation_id: str, host: str, port: int,
                        now: float, inter_broker: tuple[str, int] | None = None) -> tuple[Errors, int]:
        """BrokerRegistration: (error, broker epoch). ``inter_broker``: the broker's inter-broker
        listener when the other brokers must not dial its clients' one."""
        self.last_contact[broker_id] = now
        if not self.has_quorum(now):
            return Errors.REQUEST_TIMED_OUT, -1
        old = self.image.brokers.get(broker_id)
        if old is not None and old.incarnation_id == incarnation_id:
            return Errors.NONE, old.broker_epoch        # the same start asking again
        self.shutdown_offsets.pop(broker_id, None)
        self.metadata_offsets.pop(broker_id, None)
        if old is not None and not old.fenced:
            log.info("broker %d registers a new incarnation: fencing the old one", broker_id)
            self._fence(broker_id)
        epoch = self.image.offset + 1
        ib_host, ib_port = inter_broker or ("", 0)
        self.image.brokers[broker_id] = BrokerRegistration(broker_id, incarnation_id, epoch, host, port, fenced=True,
                                                           inter_broker_host=ib_host, inter_broker_port=ib_port)
        self._commit(f"register broker {broker_id} at {host}:{port}")
        return Errors.NONE, epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_shut_down: bool,
                  now: float) -> tuple[Errors, bool, bool]:
        """BrokerHeartbeat: (error, is fenced, should shut down)."""
        reg = self.image.brokers.get(broker_id)
        if reg is None:
            return Errors.BROKER_ID_NOT_REGISTERED, True, False
        if reg.broker_epoch != broker_epoch:
            return Errors.STALE_BROKER_EPOCH, True, False
        self.last_contact[broker_id] = now
        self.metadata_offsets[broker_id] = metadata_offset
        if not self.has_quorum(now):
            return Errors.REQUEST_TIMED_OUT, reg.fenced, False
        if want_shut_down:
            if not reg.in_controlled_shutdown:
                reg.in_controlled_shutdown = True
                self._move_away(broker_id)
                self._commit(f"controlled shutdown of broker {broker_id}")
                self.shutdown_offsets[broker_id] = self.image.offset
            # Kafka's controller lets the broker go only once every *other* active broker has
            # reported, in a heartbeat, the change that took its leaderships away: until then it
            # answers NOT_LEADER_OR_FOLLOWER / NOT_COORDINATOR, and a broker that still routes to
            # it (a transaction verification, a replica fetch) gets that answer rather than a
            # closed connection. The stopping broker's own offset does not count.
            return Errors.NONE, reg.fenced, self.shutdown_offsets.get(broker_id, -1) <= self.lowest_active_offset()
        if reg.fenced and metadata_offset >= reg.broker_epoch:
            reg.fenced = False
            self._elect_leaderless(broker_id)
            self._commit(f"unfence broker {broker_id}")
        return Errors.NONE, reg.fenced, False

    def lowest_active_offset(self) -> int:
        """The smallest metadata offset the active brokers (unfenced, not shutting down) last
        reported; with none, no bound (Kafka's BrokerHeartbeatManager.lowestActiveOffset). A
        broker that died unfenced holds it back until its session expires and it is fenced."""
        active = [self.metadata_offsets.get(b, -1) for b, reg in self.image.brokers.items()
                  if not reg.fenced and not reg.in_controlled_shutdown]
        return min(active, default=sys.maxsize)

    def tick(self, now: float) -> None:
        """Fence every broker whose session expired."""
        if not self.has_quorum(now):
            return
        for broker_id, reg in sorted(self.image.brokers.items()):
            if reg.fenced:
                continue
            if now - self.last_contact.get(broker_id, float("-inf")) > self.session_timeout_s:
                log.info("broker %d: no heartbeat for %.1f s: fenced", broker_id, self.session_timeout_s)
                self._fence(broker_id)
                self._commit(f"fence broker {broker_id}")

    def _fence(self, broker_id: int) -> None:
        self.image.brokers[broker_id].fenced = True
        self._move_away(broker_id)

    def _move_away(self, broker_id: int) -> None:
        """Take ``broker_id`` out of every ISR (the last member stays) and every leadership."""
        for topic in self.image.topics.values():
            for i, part in enumerate(topic.partitions):
                if broker_id not in part.replicas:
                    continue
                new = part.copy()
                if broker_id in new.isr and len(new.isr) > 1:
                    new.isr = [r for r in new.isr if r != broker_id]
                self._elect(topic, new, exclude=broker_id)
                self._apply(topic, i, new)

    def _elect_leaderless(self, broker_id: int) -> None:
        """A broker came back: the partitions it replicates that have no leader may get one."""
        for topic in self.image.topics.values():
            for i, part in enumerate(topic.partitions):
                if part.leader == NO_LEADER and broker_id in part.replicas:
                    new = part.copy()
                    self._elect(topic, new)
                    self._apply(topic, i, new)

    # ================================================================== elections
    def _acceptable(self, replica: int, exclude: int | None) -> bool:
        reg = self.image.brokers.get(replica)
        return replica != exclude and reg is not None and reg.alive

    def unclean_election_enabled(self, topic: TopicImage) -> bool:
        value = topic.configs.get("unclean.leader.election.enable",
                                  self.config.str("unclean.leader.election.enable"))
        return str(value).lower() == "true"

    def _elect(self, topic: TopicImage, part: PartitionRegistration, exclude: int | None = None) -> None:
        """PartitionChangeBuilder.electAnyLeader on ``part`` (changed in place)."""
        if part.leader != NO_LEADER and part.leader in part.isr and self._acceptable(part.leader, exclude):
            return
        leader = next((r for r in part.replicas if r in part.isr and self._acceptable(r, exclude)), NO_LEADER)
        if leader == NO_LEADER and self.unclean_election_enabled(topic):
            leader = next((r for r in part.replicas if self._acceptable(r, exclude)), NO_LEADER)
            if leader != NO_LEADER:
                log.info("unclean election: %s leader %d (ISR was %s)", topic.name, leader, part.isr)
                part.isr = [leader]
        if leader != part.leader:
            part.leader = leader
            part.leader_epoch += 1

    @staticmethod
    def _apply(topic: TopicImage, index: int, new: PartitionRegistration) -> bool:
        """Make ``new`` partition ``index`` of ``topic`` if it differs (a new partition epoch)."""
        old = topic.partitions[index]
        if (new.leader, new.isr, new.replicas) == (old.leader, old.isr, old.replicas):
            return False
        new.partition_epoch = old.partition_epoch + 1
        topic.partitions[index] = new
        return True

    # ================================================================== topics
    def create_topic(self, name: str, num_partitions: int, replication_factor: int, configs: dict[str, str],
                     validate_only: bool = False, now: float = 0.0) -> TopicImage:
        """CreateTopics for one topic; raises KafkaError (TOPIC_ALREADY_EXISTS,
        INVALID_REPLICATION_FACTOR, INVALID_PARTITIONS, INVALID_TOPIC_EXCEPTION)."""
        if not self.has_quorum(now):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, "The controller has no quorum.")
        validate_topic_name(name)
        if name in self.image.topics:
            raise KafkaError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions <= 0:
            raise KafkaError(Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if replication_factor <= 0:
            raise KafkaError(Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        usable = [b.broker_id for b in self.image.alive_brokers()]
        if replication_factor > len(usable):
            raise KafkaError(Errors.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target replication "
                             f"factor of {replication_factor} cannot be reached because only {len(usable)} broker(s) "
                             "are registered.")
        start = self._next_placement
        parts = []
        for p in range(num_partitions):
            replicas = [usable[(start + p + i) % len(usable)] for i in range(replication_factor)]
            parts.append(PartitionRegistration(replicas, list(replicas), replicas[0], 0, 0))
        topic = TopicImage(name, uuid.uuid4().bytes, dict(configs), parts)
        if validate_only:
            return topic
        self._next_placement += 1
        self.image.topics[name] = topic
        self._commit(f"create topic {name} ({num_partitions} partitions, replication {replication_factor})")
        return topic

    def delete_topic(self, name: str, now: float = 0.0) -> TopicImage:
        if not self.has_quorum(now):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, "The controller has no quorum.")
        topic = self.image.topics.pop(name, None)
        if topic is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self._commit(f"delete topic {name}")
        return topic

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool = False, now: float = 0.0) -> list[PartitionRegistration]:
        """CreatePartitions for one topic (ReplicationControlManager.createPartitions): the new
        partitions, their ISR the alive replicas, led by the first of them; raises KafkaError."""
        if not self.has_quorum(now):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, "The controller has no quorum.")
        topic = self.image.topics.get(name)
        if topic is None:
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, None)
        alive = [b.broker_id for b in self.image.alive_brokers()]
        replica_lists = new_partition_replicas(name, len(topic.partitions), len(topic.partitions[0].replicas), count,
                                               assignments, sorted(self.image.brokers), alive, self._next_placement)
        parts = []
        for replicas in replica_lists:
            isr = [r for r in replicas if r in alive]
            parts.append(PartitionRegistration(replicas, isr, isr[0], 0, 0))
        if validate_only:
            return parts
        self._next_placement += 1
        topic.partitions.extend(parts)
        self._commit(f"create partitions of {name}: {count} now")
        return parts

    def alter_topic_configs(self, name: str, ops: list[tuple[str, int, str | None]] | None,
                            replace: dict[str, str] | None, validate_only: bool = False,
                            now: float = 0.0) -> dict[str, str]:
        """(Incremental)AlterConfigs on a topic (ConfigurationControlManager): its new configs,
        committed unless ``validate_only``; raises KafkaError."""
        if not self.has_quorum(now):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, "The controller has no quorum.")
        topic = self.image.topics.get(name)
        configs = alter_topic_configs(self.config, name, topic.configs if topic else {}, ops, replace)
        if topic is None:   # the existence check follows the validation, as Kafka's
            raise KafkaError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if not validate_only and configs != topic.configs:
            topic.configs = configs
            self._commit(f"alter configs of {name}")
        return configs

    def alter_broker_defaults(self, ops: list[tuple[str, int, str | None]], validate_only: bool = False,
                              now: float = 0.0) -> dict[str, str]:
        """IncrementalAlterConfigs on the BROKER resource "": the new cluster-wide defaults,
        committed (every broker applies them from the image) unless ``validate_only``."""
        if not self.has_quorum(now):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, "The controller has no quorum.")
        new = alter_broker_defaults(self.static_configs, self.image.broker_defaults, ops)
        if not validate_only and new != self.image.broker_defaults:
            self.image.broker_defaults = new
            self.config.values.clear()
            self.config.values.update(self.static_configs, **new)   # unclean.leader.election.enable
            self._commit("alter the cluster-wide broker configs")
        return new

    # ================================================================== AlterPartition
    def alter_partition(self, broker_id: int, broker_epoch: int, topic_name: str, index: int, leader_epoch: int,
                        partition_epoch: int, new_isr: list[int], now: float) -> tuple[Errors, PartitionRegistration | None]:
        """One partition's AlterPartition (alter_partitions with one item)."""
        return self.alter_partitions(broker_id, broker_epoch, [(topic_name, index, leader_epoch, partition_epoch,
                                                                new_isr)], now)[0]

    def alter_partitions(self, broker_id: int, broker_epoch: int,
                         items: list[tuple[str, int, int, int, list[int]]],
                         now: float) -> list[tuple[Errors, PartitionRegistration | None]]:
        """AlterPartition as Kafka's AlterPartitionManager sends it: every ISR change a leader has
        pending, (topic, partition, leader epoch, partition epoch, ISR) each, answered item by
        item and committed as one metadata change -- a bounce makes a leader propose the
        restarted replica back into the ISR of every partition at once, and a commit per item
        (a durable image and an image to every broker each) kept the controller from answering
        heartbeats in time (measured: live brokers fenced for missed heartbeats)."""
        reg = self.image.brokers.get(broker_id)
        if reg is None or reg.broker_epoch != broker_epoch:
            return [(Errors.STALE_BROKER_EPOCH, None)] * len(items)
        if not self.has_quorum(now):
            return [(Errors.REQUEST_TIMED_OUT, None)] * len(items)
        out, changed = [], []
        for topic_name, index, leader_epoch, partition_epoch, new_isr in items:
            err, reg_out = self._alter_one(broker_id, topic_name, index, leader_epoch, partition_epoch, new_isr,
                                           changed)
            out.append((err, reg_out))
        if changed:
            self._commit(f"alter partitions {', '.join(changed)}")
        return out

    def _alter_one(self, broker_id: int, topic_name: str, index: int, leader_epoch: int, partition_epoch: int,
                   new_isr: list[int], changed: list[str]) -> tuple[Errors, PartitionRegistration | None]:
        topic = self.image.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, None
        part = topic.partitions[index]
        if leader_epoch != part.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH, part.copy()
        if broker_id != part.leader:
            return Errors.INVALID_REQUEST, part.copy()
        if partition_epoch != part.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION, part.copy()
        if not new_isr or any(r not in part.replicas for r in new_isr) or broker_id not in new_isr:
            return Errors.INVALID_REQUEST, part.copy()
        if any(r not in part.isr and not self._acceptable(r, None) for r in new_isr):
            return Errors.INELIGIBLE_REPLICA, part.copy()
        new = part.copy()
        new.isr = [r for r in part.replicas if r in new_isr]
        if self._apply(topic, index, new):
            log.info("%s-%d: ISR %s -> %s (leader %d)", topic_name, index, part.isr, new.isr, broker_id)
            changed.append(f"{topic_name}-{index}")
        return Errors.NONE, topic.partitions[index].copy()

    # ================================================================== producer ids
    def allocate_producer_ids(self, broker_id: int, broker_epoch: int, now: float) -> tuple[Errors, int, int]:
        reg = self.image.brokers.get(broker_id)
        if reg is None or reg.broker_epoch != broker_epoch:
            return Errors.STALE_BROKER_EPOCH, -1, 0
        if not self.has_quorum(now):
            return Errors.REQUEST_TIMED_OUT, -1, 0
        first = self.image.next_producer_id
        self.image.next_producer_id += PRODUCER_ID_BLOCK_SIZE
        self._commit(f"producer ids {first}.. to broker {broker_id}")
        return Errors.NONE, first, PRODUCER_ID_BLOCK_SIZE

    # ================================================================== ElectLeaders
    def elect_leaders(self, preferred: bool, wanted: list[tuple[str, list[int]]] | None,
                      now: float = 0.0) -> list[tuple[str, list[tuple[int, Errors, str | None]]]]:
        """ElectLeaders (ReplicationControlManager.electLeaders): per topic, per partition
        (error, message). ``wanted`` None: every partition of every topic, leaving out those
        answered ELECTION_NOT_NEEDED (each topic is listed, with an empty list if need be).
        Raises KafkaError(REQUEST_TIMED_OUT) without a quorum."""
        if not self.has_quorum(now):
            raise KafkaError(Errors.REQUEST_TIMED_OUT, "The controller has no quorum.")
        out = []
        changed = False
        if wanted is None:
            for name, topic in self.image.topics.items():
                results = []
                for index in range(len(topic.partitions)):
                    err, message = self._elect_one(name, index, preferred)
                    changed |= err == Errors.NONE
                    if err != Errors.ELECTION_NOT_NEEDED:
                        results.append((index, err, message))
                out.append((name, results))
        else:
            for name, indexes in wanted:
                results = []
                for index in indexes:
                    err, message = self._elect_one(name, index, preferred)
                    changed |= err == Errors.NONE
                    results.append((index, err, message))
                out.append((name, results))
        if changed:
            self._commit(f"{'preferred' if preferred else 'unclean'} leader election")
        return out

    def _elect_one(self, name: str, index: int, preferred: bool) -> tuple[Errors, str | None]:
        """ReplicationControlManager.electLeader for one partition: a preferred election makes the
        first replica leader if it is in the ISR and alive; an unclean one elects a leaderless
        partition's first alive ISR member, else its first alive replica (which becomes the ISR),
        whatever ``unclean.leader.election.enable`` says. Messages as Kafka's ApiError gives them
        (the error's default message; None for NONE)."""
        topic = self.image.topics.get(name)
        if topic is None:
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
        if not 0 <= index < len(topic.partitions):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{index}"
        part = topic.partitions[index]
        if (part.leader == part.replicas[0]) if preferred else (part.leader != NO_LEADER):
            return Errors.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        new = part.copy()
        if preferred:
            target = part.replicas[0]
            if target not in part.isr or not self._acceptable(target, None):
                return Errors.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
        else:
            target = next((r for r in part.replicas if r in part.isr and self._acceptable(r, None)), NO_LEADER)
            if target == NO_LEADER:
                target = next((r for r in part.replicas if self._acceptable(r, None)), NO_LEADER)
                if target == NO_LEADER:
                    return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."
                log.info("unclean election asked for: %s-%d leader %d (ISR was %s)", name, index, target, part.isr)
                new.isr = [target]
        new.leader = target
        new.leader_epoch += 1
        self._apply(topic, index, new)
        return Errors.NONE, None
    # ================================================================== ACLs
    def alter_acls(self, creations: list[dict], deletions: list[dict], now: float) -> list[list[dict]] | None:
        """CreateAcls / DeleteAcls forwarded by a broker (Kafka's AclControlManager): the valid
        bindings created, then per deletion filter the bindings it removed; one commit. None
        without a quorum (nothing can be committed)."""
        if not self.has_quorum(now):
            return None
        acls = StandardAuthorizer(set(), False)
        acls.load(self.image.acls)
        before = acls.as_dicts()
        acls.create([binding_from_dict(AclBinding, d) for d in creations])
        deleted = acls.delete([binding_from_dict(AclBindingFilter, d) for d in deletions])
        if acls.as_dicts() != before:
            self.image.acls = acls.as_dicts()
            self._commit(f"ACLs: {len(creations)} created, {sum(map(len, deleted))} deleted")
        return [[binding_dict(b) for b in matched] for matched in deleted]

    # ================================================================== SCRAM credentials
    def alter_user_scram_credentials(self, deletions, upsertions, now: float):
        """AlterUserScramCredentials (Kafka's ScramControlManager): the valid changes in one step;
        None without a quorum (nothing can be committed)."""
        if not self.has_quorum(now):
            return None
        credentials = ScramCredentials()
        credentials.load_changes(self.image.scram)
        results = credentials.alter(deletions, upsertions)
        if any(r.error == Errors.NONE for r in results):
            self.image.scram = credentials.changes_to_list()
            self._commit("SCRAM credentials of " + ", ".join(sorted({r.user for r in results if r.error == Errors.NONE})))
        return results
