"""Broker configuration, with Kafka's config names and defaults.

Only names Kafka itself has are accepted (plus a few ``kconform.*`` ones for
things Kafka has no knob for, such as fault points), so a case can hand the
same ``broker_configs`` map to the embedded broker and to real Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Kafka's defaults for every setting the embedded broker reads.
DEFAULTS: dict[str, str] = {
    "node.id": "1",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "message.max.bytes": "1048588",
    "socket.request.max.bytes": "104857600",
    "log.segment.bytes": "1073741824",
    "log.roll.ms": "604800000",
    "log.index.interval.bytes": "4096",
    "log.index.size.max.bytes": "10485760",
    "log.flush.interval.messages": "9223372036854775807",
    "log.flush.interval.ms": "9223372036854775807",
    "log.flush.scheduler.interval.ms": "9223372036854775807",
    "log.retention.ms": "604800000",
    "log.retention.bytes": "-1",
    "log.message.timestamp.type": "CreateTime",
    "compression.type": "producer",
    "min.insync.replicas": "1",
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    # KIP-848 consumer groups (ConsumerGroupHeartbeat): Kafka's names and defaults
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.assignors": "uniform,range",
    # a group's target assignment is recomputed at most this often (Kafka 4.3; measured)
    "group.consumer.assignment.interval.ms": "1000",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.max.timeout.ms": "900000",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "3600000",
    "transactional.id.expiration.ms": "604800000",
    "producer.id.expiration.ms": "86400000",
    "producer.id.expiration.check.interval.ms": "600000",
    "transaction.partition.verification.enable": "true",
    # TV2: a Produce's implicit partition add that meets CONCURRENT_TRANSACTIONS (the previous
    # transaction's markers still being written) is retried this often, for this long
    "add.partitions.to.txn.retry.backoff.ms": "20",
    "add.partitions.to.txn.retry.backoff.max.ms": "100",
    "transaction.version": "2",
    "replica.fetch.max.bytes": "1048576",
    "fetch.max.bytes": "57671680",
    # the most partitions one DescribeTopicPartitions answer carries (whatever the request asks)
    "max.request.partition.size.limit": "2000",
    "max.incremental.fetch.session.cache.slots": "1000",
    "connections.max.idle.ms": "600000",
    "cluster.id": "kconform-embedded-cluster",
    # empty: advertise the bound address; "PLAINTEXT://HOST:PORT" to put a proxy in front
    "advertised.listeners": "",
    # --- a cluster (broker_impl/cluster, server/replica_manager): Kafka's names and defaults ---
    # "broker" (a node of a cluster, or the whole cluster when no voters are named) or
    # "controller" (the metadata owner of a cluster: server/controller_server.py)
    "process.roles": "broker",
    # empty: a one-node cluster that is its own controller (no replication, no controller
    # process); "ID@HOST:PORT": the controller every broker of the cluster registers with
    "controller.quorum.voters": "",
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.min.bytes": "1",
    "replica.fetch.backoff.ms": "1000",
    "replica.socket.timeout.ms": "30000",
    "unclean.leader.election.enable": "false",
    "request.timeout.ms": "30000",
    "offsets.commit.timeout.ms": "5000",
    "offsets.load.buffer.size": "5242880",
    # --- listeners, TLS and SASL (server/listeners, server/authenticator, docs/security.md) ---
    # empty: PLAINTEXT on the address given at start (--listen); else Kafka's NAME://HOST:PORT list
    "listeners": "",
    "listener.security.protocol.map": "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    # the listener the brokers of a cluster dial each other on (replica fetches, WriteTxnMarkers,
    # AddPartitionsToTxn verification); empty: the first listener
    "inter.broker.listener.name": "",
    "sasl.enabled.mechanisms": "GSSAPI",
    "connections.max.reauth.ms": "0",
    "connection.failed.authentication.delay.ms": "100",
    # the embedded broker reads PEM only (ssl.keystore.type=PEM)
    "ssl.keystore.type": "JKS",
    "ssl.keystore.location": "",
    "ssl.keystore.password": "",
    "ssl.key.password": "",
    "ssl.keystore.certificate.chain": "",
    "ssl.keystore.key": "",
    "ssl.truststore.type": "JKS",
    "ssl.truststore.location": "",
    "ssl.truststore.password": "",
    "ssl.truststore.certificates": "",
    "ssl.client.auth": "none",
    "ssl.principal.mapping.rules": "DEFAULT",
    # NAME:PASSWORD,...: the SASL users (PLAIN and SCRAM; Kafka keeps these elsewhere: docs/security.md)
    "kconform.sasl.users": "",
    # the most a controller holds a new metadata image back from one broker (drawn per broker and
    # image: server/controller_server.py); 0: every broker gets it at once
    "kconform.metadata.propagation.max.ms": "0",
    # --- ACLs (cluster/authorizer, docs/security.md): off unless Kafka's StandardAuthorizer is named ---
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
}


class ConfigError(ValueError):
    pass


@dataclass
class BrokerConfig:
    """Typed access to a ``{kafka.name: value}`` map."""

    values: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        merged = dict(DEFAULTS)
        for k, v in self.values.items():
            if k not in DEFAULTS and not k.startswith("kconform."):
                raise ConfigError(f"unknown broker config {k!r} (Kafka's config names are expected)")
            merged[k] = str(v).lower() if isinstance(v, bool) else str(v)
        self.values = merged

    def str(self, name: str) -> str:
        return self.values[name]

    def int(self, name: str) -> int:
        try:
            return int(self.values[name])
        except ValueError:
            raise ConfigError(f"broker config {name}={self.values[name]!r}: an integer was expected") from None

    def bool(self, name: str) -> bool:
        v = self.values[name].lower()
        if v not in ("true", "false"):
            raise ConfigError(f"broker config {name}={self.values[name]!r}: true or false was expected")
        return v == "true"

    def log_config(self, overrides: dict[str, str] | None = None) -> dict[str, str]:
        """The ``log.*``-derived map handed to a partition's log."""
        cfg = {k: v for k, v in self.values.items()}
        if overrides:
            cfg.update(overrides)
        return cfg


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """``["a=b", "c=d"]`` from ``--set`` flags."""
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"--set {p!r}: expected key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
