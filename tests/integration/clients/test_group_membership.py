"""Consumer groups across the client drivers: assignors by Java's names, cooperative rebalancing,
static membership, and groups whose members are different clients.

Each driver maps Java's ``partition.assignment.strategy`` (class names) onto its library's
assignor of the same JoinGroup protocol name, and ``group.instance.id`` onto its library's static
membership, or refuses the key (README.md of conformance/clients). These tests run the real
drivers against a broker with ``group.initial.rebalance.delay.ms=0`` and check what only the
group shows:

- what each member polled (records carry their partition and a sequence number, and nobody
  commits, so a partition that is revoked and assigned again is read again from offset 0: a
  record polled twice by one member is a rebalance that member went through);
- what the coordinator says (DescribeGroups: the protocol chosen, each member's assignment,
  decoded as ConsumerProtocolAssignment), which also checks that a leader computed Java's range;
- what each client offers in JoinGroup, read from a proxy's transcript.

The features the tests verify per client are ClientSpec.features (registry.py); each test runs
for the clients that list the feature it needs, and a client that lists none is checked to
refuse the config. Every wait is bounded (GROUP_DEADLINE_S).
"""

from __future__ import annotations

import itertools
import logging
import struct
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import pytest
from confluent_kafka import Producer

from broker_impl.protocol.messages import DATA
from conformance.clients import CLIENTS, ClientProcess
from conformance.clients.driver import JAVA_ASSIGNORS
from conformance.raw import send_request
from conformance.targets import Topology, TopicSpec, make_target

pytestmark = pytest.mark.timeout(240)

#: Java's class for each protocol name.
CLASS_OF = {name: cls for cls, name in JAVA_ASSIGNORS.items()}
RANGE, COOPERATIVE = CLASS_OF["range"], CLASS_OF["cooperative-sticky"]

#: The broker config of these tests: a new group's first rebalance does not wait 3 s for more
#: members (Kafka's default group.initial.rebalance.delay.ms).
GROUP_BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "0",
                       # KIP-848 members heartbeat every second, not 5 s
                       "group.consumer.heartbeat.interval.ms": "1000"}
#: Kafka refuses a heartbeat interval below its minimum (5 s) at start; the embedded broker does
#: not check the group.consumer.* bounds (docs/groups.md) and takes no config it does not apply.
KAFKA_GROUP_BROKER_CONFIG = {"group.consumer.min.heartbeat.interval.ms": "1000"}
#: Bound on every wait for a group to settle or for records to be read.
GROUP_DEADLINE_S = 60.0
PARTITIONS = 6

#: What each client offers in JoinGroup when partition.assignment.strategy is unset (its own
#: default, which the drivers keep), measured here on the wire.
DEFAULT_PROTOCOLS = {
    "java": ["range", "cooperative-sticky"],
    "confluent": ["range", "roundrobin"],
    "kafka-python": ["range", "roundrobin"],
    "franz-go": ["cooperative-sticky"],
    "sarama": ["range"],
    "aiokafka": ["roundrobin"],
    "kafkajs": ["RoundRobinAssigner"],
}
#: The Java protocol names each driver can offer (the others it refuses, INVALID_ARGUMENT).
OFFERABLE = {
    "java": ["range", "roundrobin", "sticky", "cooperative-sticky"],
    "confluent": ["range", "roundrobin", "cooperative-sticky"],
    "kafka-python": ["range", "roundrobin", "sticky", "cooperative-sticky"],
    "franz-go": ["range", "roundrobin", "sticky", "cooperative-sticky"],
    "sarama": ["range", "roundrobin", "sticky", "cooperative-sticky"],
    "aiokafka": ["range", "roundrobin", "sticky"],
    "kafkajs": ["range", "roundrobin"],
}
#: Clients whose cooperative-sticky must be offered alone: they refuse it next to an eager one.
COOPERATIVE_ONLY = {"confluent", "kafka-python"}

CLIENT_NAMES = list(CLIENTS)


def _usable(client: str) -> None:
    ok, reason = CLIENTS[client].availability()
    if not ok:
        pytest.skip(f"client {client} unavailable: {reason}")


def _with(feature: str) -> list[str]:
    return [c for c in CLIENT_NAMES if feature in CLIENTS[c].features]


# -- the broker --------------------------------------------------------------------------------------
class GroupBroker:
    def __init__(self, name: str, target: Any) -> None:
        self.name, self.target, self.bootstrap = name, target, target.bootstrap

    def topic(self, partitions: int = PARTITIONS) -> str:
        name = f"kg-{uuid.uuid4().hex[:10]}"
        self.target.create_topics([TopicSpec(name, partitions, 1)])
        return name

    def describe(self, group: str) -> dict[str, Any]:
        """DescribeGroups v5 at the group's coordinator: state, protocol and members, each member's
        assignment decoded (ConsumerProtocolAssignment) into a set of partition numbers."""
        node = self.target.group_coordinator(group, timeout=10)
        address = dict(self.target.live_addresses())[node]
        out = send_request(address, "DescribeGroups", 5, {"groups": [group], "include_authorized_operations": False},
                           retry=("COORDINATOR_LOAD_IN_PROGRESS",))
        assert out.ok, out.to_dict()
        [g] = out.data["response"]["groups"]
        members = [{"member_id": m["member_id"], "instance_id": m["group_instance_id"], "client_id": m["client_id"],
                    "partitions": _assigned(m["member_assignment"])} for m in g["members"]]
        return {"state": g["group_state"], "protocol": g["protocol_data"], "protocol_type": g["protocol_type"],
                "members": members}


def _assigned(raw: Any) -> dict[str, set[int]]:
    """A member's ConsumerProtocolAssignment (the decoded response gives bytes as hex) -> topic ->
    partitions."""
    raw = bytes.fromhex(raw) if isinstance(raw, str) else bytes(raw or b"")
    if len(raw) < 2:
        return {}
    codec = DATA["ConsumerProtocolAssignment"]
    (version,) = struct.unpack(">h", raw[:2])
    body, _ = codec.decode(min(version, 3), raw, 2)
    return {tp.topic: set(tp.partitions) for tp in body.assigned_partitions if tp.partitions}


_started: dict[str, GroupBroker] = {}


@pytest.fixture(scope="module")
def _group_brokers() -> Iterator[dict[str, GroupBroker]]:
    yield _started
    for b in _started.values():
        b.target.stop()
    _started.clear()


def _group_broker(name: str, brokers: dict[str, GroupBroker], tmp_path_factory: pytest.TempPathFactory) -> GroupBroker:
    if name not in brokers:
        target = make_target(name)
        ok, reason = target.availability()
        if not ok:
            pytest.skip(f"target {name} unavailable: {reason}")
        try:
            configs = {**GROUP_BROKER_CONFIG, **(KAFKA_GROUP_BROKER_CONFIG if name != "embedded" else {})}
            target.start(Topology(nodes=1), configs, tmp_path_factory.mktemp(f"group-{name}"))
        except BaseException:
            target.stop()
            raise
        brokers[name] = GroupBroker(name, target)
    return brokers[name]


@pytest.fixture
def embedded(_group_brokers, tmp_path_factory) -> GroupBroker:
    return _group_broker("embedded", _group_brokers, tmp_path_factory)


@pytest.fixture(params=[pytest.param("embedded", id="embedded"),
                        pytest.param("apache-kafka", id="kafka", marks=[pytest.mark.slow, pytest.mark.kafka])])
def any_broker(request, _group_brokers, tmp_path_factory) -> GroupBroker:
    return _group_broker(request.param, _group_brokers, tmp_path_factory)


# -- records -----------------------------------------------------------------------------------------
class Records:
    """Writes records whose value says partition and sequence ("p:seq"), in-process (librdkafka)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
        self.topic, self.partitions = topic, partitions
        # librdkafka's connection errors after the module's broker stopped go to a silent logger
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                  "logger": logging.getLogger("kconform.tests.group_records")})
        self.seq = itertools.count()
        self.written: list[str] = []
        self.lock = threading.Lock()

    def write(self, per_partition: int = 1) -> None:
        for _ in range(per_partition):
            for p in range(self.partitions):
                value = f"{p}:{next(self.seq)}"
                self.producer.produce(self.topic, value=value.encode(), partition=p)
                with self.lock:
                    self.written.append(value)
        assert self.producer.flush(10) == 0, "records not delivered in 10 s"

    def all(self) -> set[str]:
        with self.lock:
            return set(self.written)


@dataclass
class Member:
    """A driver in the group, polled from a thread of its own (the clients take part in a
    rebalance only while polled); ``polled`` keeps (time, partition, offset, value)."""

    proc: ClientProcess
    client: str
    client_id: str
    polled: list[tuple[float, int, int, str]] = field(default_factory=list)
    errors: list[Any] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start_polling(self) -> None:
        def loop() -> None:
            end = time.monotonic() + 4 * GROUP_DEADLINE_S
            while not self.stop.is_set() and time.monotonic() < end:
                out = self.proc.call("poll", max_records=500, timeout_ms=300, deadline_ms=10_000)
                if not out.ok:
                    self.errors.append(out.error.to_dict())
                    if out.error.name in ("DRIVER_DIED", "DRIVER_TIMEOUT"):
                        return
                    time.sleep(0.1)
                    continue
                now = time.monotonic()
                self.polled += [(now, r["partition"], r["offset"], r["value"]) for r in out.data["records"]]
        self.thread = threading.Thread(target=loop, name=f"poll-{self.client_id}", daemon=True)
        self.thread.start()

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=20)
            assert not self.thread.is_alive(), f"{self.client_id}: poll thread still running"

    def values(self) -> list[str]:
        return [v for _, _, _, v in self.polled]

    def repeated(self, partitions: set[int] | None = None) -> list[str]:
        """Records this member polled more than once (on ``partitions`` only, when given)."""
        seen: set[str] = set()
        twice = []
        for _, p, _, v in self.polled:
            if partitions is not None and p not in partitions:
                continue
            if v in seen:
                twice.append(v)
            seen.add(v)
        return twice


class Group:
    """Members of one consumer group on one topic, and the waits on them."""

    def __init__(self, broker: GroupBroker, spawn: Callable[..., ClientProcess], topic: str) -> None:
        self.broker, self.spawn, self.topic = broker, spawn, topic
        self.id = f"kg-group-{uuid.uuid4().hex[:8]}"
        self.members: list[Member] = []
        #: client.id -> the member id DescribeGroups last showed for it
        self.seen: dict[str, str] = {}

    def join(self, client: str, strategy: str | None, *, instance_id: str | None = None,
             session_timeout_ms: int = 6000, label: str | None = None, protocol: str = "classic") -> Member:
        """Start a driver, create its consumer (no commits, earliest) and subscribe; it polls from
        then on. ``protocol="consumer"``: a KIP-848 member (the broker owns its timeouts)."""
        client_id = f"{label or client}-{len(self.members)}-{uuid.uuid4().hex[:4]}"
        proc = self.spawn(client, label=client_id)
        config = {"bootstrap.servers": self.broker.bootstrap, "group.id": self.id, "client.id": client_id,
                  "auto.offset.reset": "earliest", "enable.auto.commit": "false"}
        if protocol == "consumer":
            config["group.protocol"] = "consumer"
        else:
            config.update({"session.timeout.ms": str(session_timeout_ms), "heartbeat.interval.ms": "500"})
        if strategy is not None:
            config["partition.assignment.strategy"] = strategy
        if instance_id is not None:
            config["group.instance.id"] = instance_id
        out = proc.call("create_consumer", config=config, deadline_ms=30_000)
        assert out.ok, f"{client} create_consumer: {out.to_dict()}"
        out = proc.call("subscribe", topics=[self.topic], deadline_ms=30_000)
        assert out.ok, f"{client} subscribe: {out.to_dict()}"
        member = Member(proc, client, client_id)
        member.start_polling()
        self.members.append(member)
        return member

    def live(self) -> list[Member]:
        return [m for m in self.members if not m.stop.is_set()]

    def settled(self, count: int, deadline_s: float = GROUP_DEADLINE_S,
                also: Callable[[dict[str, Any]], bool] = lambda desc: True) -> dict[str, Any]:
        """Wait until the group is Stable with ``count`` members, each with partitions, covering
        the topic once (and ``also`` holds); returns DescribeGroups with ``by_client`` (client.id
        -> member)."""
        end = time.monotonic() + deadline_s
        last: dict[str, Any] = {}
        while time.monotonic() < end:
            last = self.broker.describe(self.id)
            self.seen.update({m["client_id"]: m["member_id"] for m in last["members"]})
            owned = [p for m in last["members"] for p in m["partitions"].get(self.topic, ())]
            if (last["state"] == "Stable" and len(last["members"]) == count
                    and all(m["partitions"].get(self.topic) for m in last["members"])
                    and sorted(owned) == list(range(PARTITIONS)) and also(last)):
                last["by_client"] = {m["client_id"]: m for m in last["members"]}
                return last
            time.sleep(0.2)
        raise AssertionError(f"group {self.id} not settled with {count} members in {deadline_s} s: {last}; "
                             f"poll errors {[(m.client_id, m.errors[-3:]) for m in self.members]}")

    def read_all(self, records: Records, deadline_s: float = GROUP_DEADLINE_S) -> None:
        """Wait until the live members together polled every record written."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            seen = {v for m in self.members for v in m.values()}
            missing = records.all() - seen
            if not missing:
                return
            time.sleep(0.2)
        raise AssertionError(f"records never polled in {deadline_s} s: {sorted(missing)[:20]} "
                             f"(of {len(records.all())}); poll errors {[(m.client_id, m.errors[-3:]) for m in self.members]}")

    def evicted_unnoticed(self, client: str) -> list[str]:
        """Members of ``client`` the group had and has no more, whose drivers still poll without
        an error: evicted by the coordinator while their consumer did not notice."""
        now = {m["member_id"] for m in self.broker.describe(self.id)["members"]}
        return [m.client_id for m in self.live() if m.client == client and m.client_id in self.seen
                and self.seen[m.client_id] not in now and not m.errors]

    def halt(self) -> None:
        for m in self.members:
            m.halt()


#: kafka-python 3.0.12 loses a rejoin: a poll whose timeout ends while its JoinGroup/SyncGroup is
#: in flight leaves the join task for the next poll, which awaits it only while need_rejoin() is
#: true -- but a leader's own assignment has by then set the metadata snapshot need_rejoin()
#: compares, so the completed join is never finalised (kafka/coordinator/base.py
#: join_group_async): heartbeats stay disabled, the coordinator evicts the member after
#: session.timeout.ms, and the consumer goes on fetching its old partitions without an error.
#: Triggered when kafka-python leads a group it joined before it had the topic's metadata (the
#: first assignment is empty, the metadata that then arrives forces a second join). Measured: 1
#: run in 8 of a new kafka-python-led group on Apache Kafka 4.3.1, and on the embedded broker.
KAFKA_PYTHON_LOST_REJOIN = ("kafka-python 3.0.12 never finalised a rejoin left in flight by a poll timeout: "
                            "heartbeats stopped, the coordinator evicted it, it kept fetching (see KAFKA_PYTHON_LOST_REJOIN)")


@contextmanager
def known_client_bugs(g: Group) -> Iterator[None]:
    """A failure that is KAFKA_PYTHON_LOST_REJOIN -- a kafka-python member the group had is gone
    while its driver polls on without an error -- is an expected failure with that reason; any
    other failure stays one."""
    try:
        yield
    except AssertionError:
        evicted = g.evicted_unnoticed("kafka-python")
        if evicted:
            pytest.xfail(f"{KAFKA_PYTHON_LOST_REJOIN}: {evicted}")
        raise


@pytest.fixture
def group_of(spawn) -> Iterator[Callable[[GroupBroker], Group]]:
    groups: list[Group] = []

    def make(broker: GroupBroker) -> Group:
        g = Group(broker, spawn, broker.topic())
        groups.append(g)
        return g
    yield make
    for g in groups:
        g.halt()


#: Clients whose range orders members as Java's MemberInfo does -- static members (by
#: group.instance.id) before dynamic ones (by member id). librdkafka 2.16, Sarama 1.60 and aiokafka
#: 0.14 order by member id alone (measured): with static and dynamic members mixed, their leader's
#: range differs from Java's (a valid assignment all the same). KafkaJS has no static members.
RANGE_ORDERS_STATIC_FIRST = {"java", "kafka-python", "franz-go", "kafkajs"}


def java_range(members: list[dict[str, Any]], partitions: int = PARTITIONS,
               static_first: bool = True) -> dict[str, set[int]]:
    """Java's RangeAssignor for one topic: members ordered as its MemberInfo (instance id first,
    then member id; by member id alone when not ``static_first``), each a run of consecutive
    partitions, the first ``partitions % n`` one longer."""
    if static_first:
        order = sorted(members, key=lambda m: (m["instance_id"] is None, m["instance_id"] or "", m["member_id"]))
    else:
        order = sorted(members, key=lambda m: m["member_id"])
    per, extra = divmod(partitions, len(order))
    out, start = {}, 0
    for i, m in enumerate(order):
        length = per + (1 if i < extra else 0)
        out[m["member_id"]] = set(range(start, start + length))
        start += length
    return out


def check_range(desc: dict[str, Any], topic: str, static_first: bool = True) -> None:
    """The coordinator chose "range" and the leader computed Java's range assignment."""
    assert desc["protocol"] == "range", desc
    want = java_range(desc["members"], static_first=static_first)
    got = {m["member_id"]: m["partitions"][topic] for m in desc["members"]}
    assert got == want, f"assignment {got} is not Java's range {want}"


def check_reads(group: Group, desc: dict[str, Any], records: Records) -> None:
    """Each member polled exactly the records of the partitions the coordinator gave it, once."""
    for m in group.live():
        mine = desc["by_client"][m.client_id]["partitions"][group.topic]
        want = {v for v in records.all() if int(v.split(":")[0]) in mine}
        got = m.values()
        assert set(got) == want, (f"{m.client_id} polled {sorted(set(got) - want)[:10]} beyond its partitions "
                                  f"{sorted(mine)} and missed {sorted(want - set(got))[:10]}")
        assert not m.repeated(), f"{m.client_id} polled records twice: {m.repeated()[:10]}"


# -- config mapping ----------------------------------------------------------------------------------
@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_join_group_offers_the_java_protocol_names(client, embedded, spawn):
    """What a member offers in JoinGroup, read from a proxy's transcript: unset, the library's own
    default (DEFAULT_PROTOCOLS); set, the Java protocol names in the order given."""
    _usable(client)
    from conformance.runner.proxying import ProxyFront
    from conformance.proxy.transcript import decode_line

    front = ProxyFront.rewriting(embedded.target)
    try:
        offered_lists = {}
        eager = [n for n in OFFERABLE[client] if n != "cooperative-sticky"]
        cases = {"default": None, "eager": ",".join(CLASS_OF[n] for n in reversed(eager))}
        if "cooperative-sticky" in OFFERABLE[client]:
            cases["cooperative"] = COOPERATIVE
        for case, strategy in cases.items():
            front.begin_case()
            topic, group = embedded.topic(1), f"kg-offer-{uuid.uuid4().hex[:8]}"
            proc = spawn(client, label=f"{client}-{case}")
            config = {"bootstrap.servers": front.bootstrap, "group.id": group, "session.timeout.ms": "6000"}
            if strategy is not None:
                config["partition.assignment.strategy"] = strategy
            assert proc.call("create_consumer", config=config).ok
            assert proc.call("subscribe", topics=[topic]).ok
            protocols = None
            end = time.monotonic() + GROUP_DEADLINE_S
            while protocols is None and time.monotonic() < end:
                proc.call("poll", max_records=1, timeout_ms=300)
                for line in front.transcript_lines():
                    frame = decode_line(line)
                    if (frame and frame["api"] == "JoinGroup" and frame["direction"] == "request"
                            and frame["fields"] and frame["fields"]["group_id"] == group):
                        protocols = [p["name"] for p in frame["fields"]["protocols"]]
                        assert frame["fields"]["protocol_type"] == "consumer"
            proc.kill()
            offered_lists[case] = protocols
        print(f"{client} JoinGroup protocols: {offered_lists}")
        assert offered_lists["default"] == DEFAULT_PROTOCOLS[client], offered_lists
        assert offered_lists["eager"] == list(reversed(eager)), offered_lists
        if "cooperative" in cases:
            assert offered_lists["cooperative"] == ["cooperative-sticky"], offered_lists
    finally:
        front.stop()


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_config_a_client_cannot_do_is_refused(client, spawn, dead_bootstrap):
    """Java's short names are no class (Java: ClassNotFoundException), so no driver takes them;
    an assignor or static membership the library lacks is INVALID_ARGUMENT from the driver,
    naming the key and the value. One driver tries every config (a refused create leaves no
    consumer; an accepted one is closed at once)."""
    _usable(client)
    base = {"bootstrap.servers": dead_bootstrap, "group.id": "g",
            **({"api.version": "2.8"} if client == "kafka-python" else {})}
    proc = spawn(client)

    def create(key: str, value: str) -> Any:
        out = proc.call("create_consumer", config={**base, key: value}, deadline_ms=10_000)
        if out.ok:
            closed = proc.call("close", which="consumer", timeout_ms=0, deadline_ms=10_000)
            assert closed.ok, closed.to_dict()
        return out

    refused = [(("partition.assignment.strategy", "range"), None),
               (("partition.assignment.strategy", f"{RANGE},"), None)]
    refused += [(("partition.assignment.strategy", CLASS_OF[n]), "driver")
                for n in JAVA_ASSIGNORS.values() if n not in OFFERABLE[client]]
    if "static_membership" not in CLIENTS[client].features:
        refused.append((("group.instance.id", "i-1"), "driver"))
    for (key, value), origin in refused:
        out = create(key, value)
        assert not out.ok, f"{client} accepted {key}={value!r}"
        # Java's own answer to a class it cannot load: KafkaException (ClassNotFoundException)
        java_class = client == "java" and value == "range"
        assert out.error.name == ("CLIENT_ERROR" if java_class else "INVALID_ARGUMENT"), out.to_dict()
        if origin == "driver":
            assert out.error.origin == "driver" and key in out.error.message and value in out.error.message, \
                out.to_dict()
    for name in OFFERABLE[client]:  # every name it can offer is taken
        out = create("partition.assignment.strategy", f" {CLASS_OF[name]} ")
        assert out.ok, (name, out.to_dict())
    if "cooperative-sticky" in OFFERABLE[client]:
        # Java (eager then), franz-go and Sarama take eager and cooperative assignors together;
        # librdkafka and kafka-python refuse the mix themselves
        out = create("partition.assignment.strategy", f"{RANGE},{COOPERATIVE}")
        if client in COOPERATIVE_ONLY:
            assert not out.ok and out.error.name == "INVALID_ARGUMENT" and out.error.origin == "client", out.to_dict()
        else:
            assert out.ok, out.to_dict()


# -- one client --------------------------------------------------------------------------------------
@pytest.mark.parametrize("client", _with("range_assignor"))
def test_two_members_share_partitions_by_range(client, embedded, group_of):
    """Two members of one client with range: the coordinator picks "range", the leader (the first
    member) computes Java's range assignment, and each member polls its partitions' records, once."""
    _usable(client)
    range_pair(group_of(embedded), client, client)


def range_pair(g: Group, leader: str, follower: str) -> None:
    """``leader`` joins and settles alone (the leader), then ``follower``: the coordinator picks
    "range", the leader computed Java's range, and each member polls its partitions, once."""
    with known_client_bugs(g):
        _range_pair(g, leader, follower)


def _range_pair(g: Group, leader: str, follower: str) -> None:
    g.join(leader, RANGE)
    g.settled(1)
    g.join(follower, RANGE)
    desc = g.settled(2)
    check_range(desc, g.topic)
    records = Records(g.broker.bootstrap, g.topic)
    records.write(5)
    g.read_all(records)
    check_reads(g, desc, records)


def cooperative_third_member(g: Group, first: list[str], third: str) -> dict[str, Any]:
    """Members of ``first`` (cooperative-sticky) settle and read a batch; then ``third`` joins
    while records keep coming. Checks that the first members went through it incrementally:
    each keeps a subset of its partitions (sticky), and on those it polled nothing twice (its
    position was kept: an eager revoke would restart them at offset 0, nothing being committed)
    and kept polling new records during and after the join. Returns figures for the report."""
    with known_client_bugs(g):
        return _cooperative_third_member(g, first, third)


def _cooperative_third_member(g: Group, first: list[str], third: str) -> dict[str, Any]:
    for i, client in enumerate(first):
        g.join(client, COOPERATIVE)
        before = g.settled(i + 1)
    assert before["protocol"] == "cooperative-sticky", before
    records = Records(g.broker.bootstrap, g.topic)
    records.write(5)
    g.read_all(records)
    check_reads(g, before, records)

    stop = threading.Event()

    def keep_writing() -> None:
        end = time.monotonic() + 2 * GROUP_DEADLINE_S
        while not stop.is_set() and time.monotonic() < end:
            records.write(1)
            time.sleep(0.05)
    writer = threading.Thread(target=keep_writing, daemon=True)
    writer.start()
    try:
        newcomer = g.join(third, COOPERATIVE)
        subscribed_at = time.monotonic()
        after = g.settled(len(first) + 1)
        settled_at = time.monotonic()
        time.sleep(1.0)  # records written after the rebalance too
    finally:
        stop.set()
        writer.join(timeout=30)
    records.write(2)
    g.read_all(records)
    assert after["protocol"] == "cooperative-sticky", after
    assert after["by_client"][newcomer.client_id]["partitions"][g.topic], after
    figures = {}
    for m in g.members[:-1]:
        had = before["by_client"][m.client_id]["partitions"][g.topic]
        kept = after["by_client"][m.client_id]["partitions"][g.topic]
        assert kept <= had, f"{m.client_id} had {had}, now {kept}: not sticky"
        assert not m.repeated(kept), (f"{m.client_id} polled records of its retained partitions {sorted(kept)} "
                                      f"twice (revoked and restarted): {m.repeated(kept)[:10]}")
        during = [v for t, p, _, v in m.polled if p in kept and subscribed_at <= t <= settled_at]
        later = [v for t, p, _, v in m.polled if p in kept and t > settled_at]
        assert later, f"{m.client_id} polled nothing from its retained partitions {sorted(kept)} after the rebalance"
        mine = {v for v in records.all() if int(v.split(":")[0]) in kept}
        assert mine <= set(m.values()), f"{m.client_id} missed records of retained partitions: {sorted(mine - set(m.values()))[:10]}"
        figures[m.client_id] = {"kept": sorted(kept), "had": sorted(had), "during": len(during), "after": len(later),
                                "rebalance_s": round(settled_at - subscribed_at, 2)}
    print(f"cooperative join of {third} to {first}: {figures}")
    return figures


@pytest.mark.parametrize("client", _with("cooperative_rebalance"))
def test_cooperative_rebalance_keeps_retained_partitions_polling(client, embedded, group_of):
    _usable(client)
    cooperative_third_member(group_of(embedded), [client, client], client)


@pytest.mark.parametrize("client", [c for c in CLIENT_NAMES if c not in _with("cooperative_rebalance")])
def test_clients_without_cooperative_rebalance_do_not_list_it(client, embedded, group_of):
    """A client without the feature either refuses cooperative-sticky (INVALID_ARGUMENT, above)
    or takes part in the protocol eagerly: then a retained partition is revoked and read again,
    which is why the feature is not listed (measured: Sarama 1.60.2 ends its session on every
    rebalance and rejoins owning nothing)."""
    _usable(client)
    if "cooperative-sticky" not in OFFERABLE[client]:
        pytest.skip(f"{client} refuses cooperative-sticky (test_config_a_client_cannot_do_is_refused)")
    with pytest.raises(AssertionError, match="twice|not sticky") as eager:
        cooperative_third_member(group_of(embedded), [client, client], client)
    print(f"{client} under cooperative-sticky: {str(eager.value).splitlines()[0]}")


@pytest.mark.parametrize("client", _with("static_membership"))
def test_static_member_restarted_within_session_timeout_keeps_its_assignment(client, embedded, group_of):
    """A static member (group.instance.id) killed and started again before session.timeout.ms
    takes its place: the coordinator hands it the old assignment under a new member id and the
    group does not rebalance -- the other member (eager range, nothing committed) never re-reads
    a record, and the restarted one resumes at its committed offsets."""
    _usable(client)
    g = group_of(embedded)
    with known_client_bugs(g):
        other = g.join(client, RANGE)  # joins first: the leader, so the restart is a follower's
        g.settled(1)
        instance = f"static-{uuid.uuid4().hex[:6]}"
        static = g.join(client, RANGE, instance_id=instance, session_timeout_ms=30_000, label=f"{client}-static")
        before = g.settled(2)
        check_range(before, g.topic, static_first=client in RANGE_ORDERS_STATIC_FIRST)
        mine = before["by_client"][static.client_id]
        assert mine["instance_id"] == instance, before
        records = Records(embedded.bootstrap, g.topic)
        records.write(5)
        g.read_all(records)
        check_reads(g, before, records)
        static.halt()
        out = static.proc.call("commit", deadline_ms=20_000)
        assert out.ok, out.to_dict()
        static.proc.kill()  # a crash: no LeaveGroup

        again = g.join(client, RANGE, instance_id=instance, session_timeout_ms=30_000, label=f"{client}-static-again")

        def replaced(desc: dict[str, Any]) -> bool:
            return any(m["instance_id"] == instance and m["member_id"] != mine["member_id"] for m in desc["members"])
        after = g.settled(2, also=replaced)
        # the coordinator keeps the replaced member's client.id (Kafka's replaceStaticMember): found by instance id
        [back] = [m for m in after["members"] if m["instance_id"] == instance]
        assert back["member_id"] != mine["member_id"] and back["client_id"] == mine["client_id"], after
        assert back["partitions"] == mine["partitions"], f"assignment {mine['partitions']} -> {back['partitions']}"
        assert after["by_client"][other.client_id]["member_id"] == before["by_client"][other.client_id]["member_id"]
        first_batch = records.all()
        records.write(3)
        g.read_all(records)
        assert not other.repeated(), f"the other member was revoked (rebalance): re-read {other.repeated()[:10]}"
        resumed = set(again.values())
        assert resumed and not resumed & first_batch, f"the restarted member re-read {sorted(resumed & first_batch)[:10]}"
        assert {int(v.split(':')[0]) for v in resumed} <= mine["partitions"][g.topic]


# -- two clients in one group ------------------------------------------------------------------------
def _ring(clients: list[str]) -> list[tuple[str, str]]:
    """Each client leads once and follows once: (leader, follower) pairs around a ring."""
    return [(clients[i], clients[(i + 1) % len(clients)]) for i in range(len(clients))] if len(clients) > 1 else []


@pytest.mark.parametrize("leader,follower", _ring(_with("range_assignor")), ids=lambda c: c)
def test_mixed_group_shares_range(leader, follower, any_broker, group_of):
    """Members of two clients in one group with range: the leader's assignor (its client's)
    computes Java's range, the follower takes it, and each polls only its partitions."""
    _usable(leader)
    _usable(follower)
    range_pair(group_of(any_broker), leader, follower)


@pytest.mark.parametrize("leader,follower", _ring(_with("cooperative_rebalance")), ids=lambda c: c)
def test_mixed_group_shares_cooperative_sticky(leader, follower, any_broker, group_of):
    """Members of two clients with cooperative-sticky, then a third (the leader's client) joins:
    both first members keep polling the partitions they retain."""
    _usable(leader)
    _usable(follower)
    cooperative_third_member(group_of(any_broker), [leader, follower], leader)


# -- KIP-848 -----------------------------------------------------------------------------------------
def _consumer_group(broker: GroupBroker, group: str) -> dict[str, Any]:
    """ConsumerGroupDescribe v0 at the group's coordinator: state and each member's (client id ->)
    assigned partitions."""
    node = broker.target.group_coordinator(group, timeout=10)
    out = send_request(dict(broker.target.live_addresses())[node], "ConsumerGroupDescribe", 0,
                       {"group_ids": [group], "include_authorized_operations": False},
                       retry=("COORDINATOR_LOAD_IN_PROGRESS",))
    assert out.ok, out.to_dict()
    [g] = out.data["response"]["groups"]
    return {"error": g["error_code"], "state": g["group_state"],
            "members": {m["client_id"]: {p for t in m["assignment"]["topic_partitions"] for p in t["partitions"]}
                        for m in g["members"]}}


def _consumer_group_until(broker: GroupBroker, group: str, holds: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    end = time.monotonic() + GROUP_DEADLINE_S
    last: dict[str, Any] = {}
    while time.monotonic() < end:
        last = _consumer_group(broker, group)
        if last["error"] == 0 and holds(last):
            return last
        time.sleep(0.2)
    raise AssertionError(f"consumer group {group} never got there in {GROUP_DEADLINE_S} s: {last}")


@pytest.mark.parametrize("client", _with("consumer_group_protocol"))
def test_consumer_protocol_members_share_partitions_and_one_leaves(client, any_broker, group_of):
    """``group.protocol=consumer`` (registry ``consumer_group_protocol``): two members of the
    client join a KIP-848 consumer group -- ConsumerGroupDescribe shows both, the broker's
    assignment covering the topic once -- and read every record between them; one closes (it
    leaves: a heartbeat with epoch -1), the other is assigned every partition and reads the rest."""
    _usable(client)
    g = group_of(any_broker)
    records = Records(any_broker.bootstrap, g.topic)
    a = g.join(client, None, protocol="consumer")
    b = g.join(client, None, protocol="consumer")

    def shared(desc: dict[str, Any]) -> bool:
        owned = [p for ps in desc["members"].values() for p in ps]
        return (set(desc["members"]) == {a.client_id, b.client_id} and all(desc["members"].values())
                and sorted(owned) == list(range(PARTITIONS)))
    _consumer_group_until(any_broker, g.id, shared)
    records.write(2)
    g.read_all(records)
    b.halt()
    out = b.proc.call("close", timeout_ms=10_000, deadline_ms=15_000)
    assert out.ok, f"{client} close: {out.to_dict()}"
    desc = _consumer_group_until(any_broker, g.id, lambda d: d["members"].get(a.client_id) == set(range(PARTITIONS))
                                 and set(d["members"]) == {a.client_id})
    assert desc["state"] == "Stable"
    records.write(2)
    g.read_all(records)
