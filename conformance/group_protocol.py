"""A run under one consumer group protocol: `kconform run --group-protocol consumer` (issue 25,
docs/groups.md).

Why a run-level switch and not a case field: users do not rewrite their applications for KIP-848,
they set ``group.protocol=consumer`` in their consumers' configs. So the library's cases run
unchanged, and every consumer a case's actors create (consumers, copiers, the workload's copiers:
runner/actors ``consumer_config``) gets the run's protocol -- unless the case sets
``group.protocol`` itself. Rows record the protocol they ran under (Row.group_protocol).

A row under the consumer protocol is not applicable, with its reason, when
- its client has no KIP-848 consumer (ClientSpec.features ``consumer_group_protocol``);
- its case has no consumer driven by a client (raw actors speak whichever protocol their steps
  spell: the row would be the classic one again);
- a consumer of the case sets a config the consumer protocol does not take (Java's
  ConsumerConfig refuses ``partition.assignment.strategy``, ``session.timeout.ms`` and
  ``heartbeat.interval.ms`` with ``group.protocol=consumer``: the broker owns them, as
  ``group.consumer.*`` configs); the case measures classic behaviour there;
- its target has no ConsumerGroupHeartbeat (Apache Kafka before 4.0, peers without KIP-848:
  known once the target runs, targets/base ``API_CAPABILITIES``).

One process-wide setting, as conformance/security's: the places that read it (the actors'
configs, the row's rules) are far from the command line.
"""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from .dsl.model import Case

#: ``--group-protocol`` values: Kafka's ``group.protocol`` names, lower case.
PROTOCOLS = ("classic", "consumer")
CLASSIC, CONSUMER = PROTOCOLS
#: The client feature (clients/registry GROUP_FEATURES) and the target capability it needs.
FEATURE = CAPABILITY = "consumer_group_protocol"
#: Consumer configs of the classic protocol only: with group.protocol=consumer Java's
#: ConsumerConfig refuses them (the broker's group.consumer.* configs own these).
CLASSIC_ONLY_CONFIGS = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")
#: The actor roles whose processes create a consumer (runner/actors ``_setup``).
CONSUMER_ROLES = ("consumer", "copier")

_current = CLASSIC


def current() -> str:
    """The run's group protocol (classic unless ``use`` set another)."""
    return _current


@contextlib.contextmanager
def use(protocol: str) -> Iterator[str]:
    global _current
    if protocol not in PROTOCOLS:
        raise ValueError(f"--group-protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")
    previous, _current = _current, protocol
    try:
        yield protocol
    finally:
        _current = previous


def consumer_defaults() -> dict[str, str]:
    """What a consumer of the run gets unless its case sets the key."""
    return {"group.protocol": CONSUMER} if _current == CONSUMER else {}


def row_protocol() -> str | None:
    """What a row records (None, not written: classic, as every row before the switch)."""
    return _current if _current != CLASSIC else None


def case_reason(case: "Case") -> str | None:
    """Why ``case`` has no row under the run's protocol (None: it has one; always None when
    the run is classic)."""
    if _current == CLASSIC:
        return None
    members = {name: a for name, a in case.actors.items() if a.role in CONSUMER_ROLES}
    if case.workload is not None:
        # its copiers are consumers the workload creates (actors.consumer_config)
        from .clients.registry import CLIENTS

        lacking = sorted(c for c in case.workload.clients() if FEATURE not in CLIENTS[c].features)
        return (f"the workload pins client(s) {lacking}, which have no KIP-848 consumer"
                if lacking else None)
    if not members:
        return ("the case has no consumer driven by a client (its raw steps speak the protocol they "
                "spell): its rows are the classic run's")
    for name, a in sorted(members.items()):
        if str(a.config.get("group.protocol", CONSUMER)).lower() != CONSUMER:
            return f"actor {name!r} sets group.protocol={a.config['group.protocol']}"
        classic = [k for k in CLASSIC_ONLY_CONFIGS if k in a.config]
        if classic:
            return (f"actor {name!r} sets {', '.join(classic)}, which group.protocol=consumer does not take "
                    f"(the broker's group.consumer.* configs own them): the case measures the classic protocol")
    return None


def client_reason(case: "Case", client: str, features: frozenset[str]) -> str | None:
    """Why ``client`` has no row of ``case`` under the consumer protocol (None: it has one)."""
    if FEATURE in features or not uses_consumer_protocol(case):
        return None
    return f"{client} has no KIP-848 consumer (group.protocol=consumer)"


def target_reason(case: "Case", name: str, capabilities: frozenset[str]) -> str | None:
    """Why a running target has no row of ``case`` under the consumer protocol (None: it has one)."""
    if CAPABILITY in capabilities or not uses_consumer_protocol(case):
        return None
    return f"target {name!r} does not advertise ConsumerGroupHeartbeat (KIP-848 consumer groups)"


def uses_consumer_protocol(case: "Case") -> bool:
    """Whether the row's group members are KIP-848 members: the run's protocol, or a case whose
    consumers set ``group.protocol=consumer`` themselves."""
    return _current == CONSUMER or any(
        a.role in CONSUMER_ROLES and str(a.config.get("group.protocol", "")).lower() == CONSUMER
        for a in case.actors.values())


def joins_by_subscription(case: "Case") -> bool:
    """Whether a client of the case joins a group (a subscribing consumer, a workload's copiers)."""
    return case.workload is not None or any(a.role in CONSUMER_ROLES and a.inputs and not a.assign
                                            for a in case.actors.values())


def members_check(case: "Case", transcript: list[dict]) -> "Check | None":
    """On a row whose members should be KIP-848 members, whether they were: a ConsumerGroupHeartbeat
    crossed the proxy. A client that falls back to the classic protocol without a word (franz-go
    does when its balancer is not range or sticky, or the broker lacks KIP-848 v1) would otherwise
    pass a consumer-protocol row with classic behaviour. None: nothing to check."""
    from .results import Check

    if not (uses_consumer_protocol(case) and joins_by_subscription(case)):
        return None
    heartbeats = sum(1 for line in transcript if line.get("dir") == "c2b" and line.get("api_key") == 68)
    joins = sum(1 for line in transcript if line.get("dir") == "c2b" and line.get("api_key") == 11
                and not str(line.get("client_id") or "").startswith("kconform-"))   # the raw actor's own
    return Check("group members used the consumer protocol (ConsumerGroupHeartbeat, KIP-848)",
                 heartbeats > 0 and joins == 0,
                 f"{heartbeats} ConsumerGroupHeartbeat and {joins} JoinGroup request(s) from clients")
