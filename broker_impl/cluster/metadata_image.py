"""The cluster's metadata as the controller owns it and every broker sees it (Kafka's
MetadataImage: ClusterImage + TopicsImage, built from RegisterBrokerRecord, TopicRecord,
PartitionRecord / PartitionChangeRecord, FenceBrokerRecord...).

Why an image and not records: Kafka's brokers replay the controller's metadata log into an
image and act on the difference between two images (MetadataDelta). The embedded cluster is
small (a handful of brokers and topics), so the controller publishes the whole image, stamped
with the offset of its last change, and each broker diffs it against the one it applied
(``ReplicaManager.apply_image``). One JSON form serves the controller's durable copy and the
channel to the brokers.

Kafka's names: a broker's ``broker_epoch`` is the metadata offset of its registration (so a
restarted broker has a new, larger one), a partition's ``leader_epoch`` changes with its leader
and its ``partition_epoch`` with any change (AlterPartition must name the current one).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

NO_LEADER = -1


@dataclass
class BrokerRegistration:
    broker_id: int
    incarnation_id: str          # a new one at every start: tells a restart from a reconnect
    broker_epoch: int
    host: str                    # the advertised listener clients dial
    port: int
    fenced: bool = True
    in_controlled_shutdown: bool = False
    #: the inter-broker listener (inter.broker.listener.name) when it is not the clients' one;
    #: "" / 0: the brokers dial host:port too
    inter_broker_host: str = ""
    inter_broker_port: int = 0

    @property
    def inter_broker_endpoint(self) -> tuple[str, int]:
        """Where the other brokers dial this one (Kafka's endpoint of the inter-broker listener)."""
        return (self.inter_broker_host, self.inter_broker_port) if self.inter_broker_port else (self.host, self.port)

    @property
    def alive(self) -> bool:
        """Kafka's "active" broker: registered, unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass
class PartitionRegistration:
    replicas: list[int]
    isr: list[int]
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0

    def copy(self) -> "PartitionRegistration":
        return PartitionRegistration(list(self.replicas), list(self.isr), self.leader, self.leader_epoch,
                                     self.partition_epoch)


@dataclass
class TopicImage:
    name: str
    topic_id: bytes
    configs: dict[str, str]
    partitions: list[PartitionRegistration] = field(default_factory=list)


@dataclass
class MetadataImage:
    #: Offset of the last change in the controller's metadata log (-1: nothing yet).
    offset: int = -1
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicImage] = field(default_factory=dict)
    #: The start of the next producer id block the controller hands out (AllocateProducerIds).
    next_producer_id: int = 0
    #: The cluster-wide dynamic broker configs (Kafka's ConfigRecords of the BROKER resource "").
    broker_defaults: dict[str, str] = field(default_factory=dict)
    #: SCRAM credentials (UserScramCredentialRecord / RemoveUserScramCredentialRecord), in
    #: cluster/scram's JSON form
    scram: list[dict] = field(default_factory=list)
    #: ACLs (AccessControlEntryRecord / RemoveAccessControlEntryRecord), in creation order, in
    #: cluster/authorizer's JSON form
    acls: list[dict] = field(default_factory=list)

    # ------------------------------------------------------------------ questions
    def alive_brokers(self) -> list[BrokerRegistration]:
        return [b for _, b in sorted(self.brokers.items()) if b.alive]

    def partition(self, topic: str, index: int) -> PartitionRegistration | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    # ------------------------------------------------------------------ JSON form
    def to_dict(self) -> dict:
        return {
            "offset": self.offset,
            "next_producer_id": self.next_producer_id,
            "broker_defaults": self.broker_defaults,
            "scram": self.scram,
            "acls": self.acls,
            "brokers": [asdict(b) for _, b in sorted(self.brokers.items())],
            "topics": [{"name": t.name, "topic_id": t.topic_id.hex(), "configs": t.configs,
                        "partitions": [asdict(p) for p in t.partitions]}
                       for t in self.topics.values()],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "MetadataImage":
        img = cls(offset=d["offset"], next_producer_id=d.get("next_producer_id", 0),
                  broker_defaults=dict(d.get("broker_defaults") or {}), scram=d.get("scram", []),
                  acls=d.get("acls", []))
        for b in d["brokers"]:
            reg = BrokerRegistration(**b)
            img.brokers[reg.broker_id] = reg
        for t in d["topics"]:
            img.topics[t["name"]] = TopicImage(t["name"], bytes.fromhex(t["topic_id"]), dict(t["configs"]),
                                               [PartitionRegistration(**p) for p in t["partitions"]])
        return img
