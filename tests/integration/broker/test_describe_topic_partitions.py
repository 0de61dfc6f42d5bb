"""DescribeTopicPartitions (75) over real sockets: all topics and named ones, pages followed by
their next_cursor, the cursor's start, the partition cap, invalid cursors, ACLs and a 3-node
cluster (handlers/describe_topic_partitions.py says what Kafka 4.3.1 does)."""

from __future__ import annotations

import time

from broker_impl.codec import API
from conformance.targets.topology import TopicSpec

from .rawclient import RawConnection

Q = API["DescribeTopicPartitions"].Request
ALL_TOPIC_OPS = 3576            # every topic operation Kafka 4.3.1 supports (test_acls)
NO_OPS = -2**31


def _describe(bootstrap: str, names=(), limit: int = 2000, cursor=None, conn=None):
    body = Q(topics=[Q.TopicRequest(name=n) for n in names], response_partition_limit=limit,
             cursor=None if cursor is None else Q.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    if conn is not None:
        return conn.request("DescribeTopicPartitions", 0, body)
    with RawConnection(bootstrap) as c:
        return c.request("DescribeTopicPartitions", 0, body)


def _cursor(r):
    return None if r.next_cursor is None else (r.next_cursor.topic_name, r.next_cursor.partition_index)


def _listed(r):
    """[(topic, error, [partition indexes])] of an answer."""
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in r.topics]


def _metadata_ids(bootstrap: str, names) -> dict[str, bytes]:
    M = API["Metadata"].Request
    with RawConnection(bootstrap) as conn:
        r = conn.request("Metadata", 12, M(topics=[M.MetadataRequestTopic(name=n, topic_id=bytes(16)) for n in names],
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    return {t.name: bytes(t.topic_id) for t in r.topics}


def test_advertised_at_kafkas_versions(broker):
    with RawConnection(broker.bootstrap) as conn:
        r = conn.request("ApiVersions", 3, API["ApiVersions"].Request(client_software_name="t",
                                                                      client_software_version="1"))
    assert [(k.min_version, k.max_version) for k in r.api_keys if k.api_key == 75] == [(0, 0)]


def test_all_topics_and_named_topics(start):
    _target, bootstrap = start(1, [TopicSpec("b", 3, 1), TopicSpec("a", 2, 1), TopicSpec("c", 1, 1)])
    r = _describe(bootstrap)
    assert _listed(r) == [("a", 0, [0, 1]), ("b", 0, [0, 1, 2]), ("c", 0, [0])]
    assert r.next_cursor is None and r.throttle_time_ms == 0
    ids = _metadata_ids(bootstrap, "abc")
    for t in r.topics:
        assert (bytes(t.topic_id), t.is_internal, t.topic_authorized_operations) == (ids[t.name], False, ALL_TOPIC_OPS)
        for p in t.partitions:
            assert (p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas,
                    p.last_known_elr, p.offline_replicas) == (0, 1, 0, [1], [1], [], [], [])
    # named: each once, by name; an unknown one UNKNOWN_TOPIC_OR_PARTITION, an illegal name
    # INVALID_TOPIC_EXCEPTION, neither with partitions nor an id (operations are still reported)
    r = _describe(bootstrap, ["c", "nope", "a", "a", "bad/name", "__share_group_state"])
    assert _listed(r) == [("__share_group_state", 3, []), ("a", 0, [0, 1]), ("bad/name", 17, []), ("c", 0, [0]),
                          ("nope", 3, [])]
    assert [bytes(t.topic_id) == bytes(16) for t in r.topics] == [True, False, True, False, True]
    assert [t.is_internal for t in r.topics] == [True, False, False, False, False]   # Kafka's Topic.isInternal
    assert {t.topic_authorized_operations for t in r.topics} == {ALL_TOPIC_OPS}
    assert r.next_cursor is None


def test_pages_follow_next_cursor_to_the_end(start):
    _target, bootstrap = start(1, [TopicSpec("a", 2, 1), TopicSpec("b", 3, 1), TopicSpec("c", 1, 1)])
    with RawConnection(bootstrap) as conn:
        pages, cursor = [], None
        while True:
            r = _describe(bootstrap, limit=2, cursor=cursor, conn=conn)
            pages.append((_listed(r), _cursor(r)))
            cursor = _cursor(r)
            if cursor is None:
                break
        # "a" fills the first page exactly: the cursor names the next topic at 0
        assert pages == [([("a", 0, [0, 1])], ("b", 0)),
                         ([("b", 0, [0, 1])], ("b", 2)),
                         ([("b", 0, [2]), ("c", 0, [0])], None)]
        # the same over named topics: an unknown name costs nothing, but a limit used up just
        # before it makes it the next cursor's topic all the same
        r = _describe(bootstrap, ["c", "b", "zz", "a"], limit=4, cursor=("b", 1), conn=conn)
        assert (_listed(r), _cursor(r)) == ([("b", 0, [1, 2]), ("c", 0, [0]), ("zz", 3, [])], None)
        r = _describe(bootstrap, ["c", "b", "zz", "a"], limit=3, cursor=("b", 1), conn=conn)
        assert (_listed(r), _cursor(r)) == ([("b", 0, [1, 2]), ("c", 0, [0])], ("zz", 0))
        r = _describe(bootstrap, ["a", "b", "x"], limit=2, conn=conn)
        assert (_listed(r), _cursor(r)) == ([("a", 0, [0, 1])], ("b", 0))
        # a limit below 1 is 1
        for limit in (0, -5):
            r = _describe(bootstrap, limit=limit, conn=conn)
            assert (_listed(r), _cursor(r)) == ([("a", 0, [0])], ("a", 1))
        # the cursor's topic in an all-topics request need not exist: topics after its name
        r = _describe(bootstrap, cursor=("bb", 7), conn=conn)
        assert (_listed(r), _cursor(r)) == ([("c", 0, [0])], None)
        # past the cursor topic's last partition: the topic without partitions, no error
        r = _describe(bootstrap, cursor=("b", 9), conn=conn)
        assert (_listed(r), _cursor(r)) == ([("b", 0, []), ("c", 0, [0])], None)
        # Kafka sums the start and the limit as Java ints: a cursor near 2^31 wraps
        r = _describe(bootstrap, limit=2000, cursor=("c", 2**31 - 1), conn=conn)
        assert (_listed(r), _cursor(r)) == ([("c", 0, [])], ("c", 2**31 - 1 + 2000 - 2**32))


def test_invalid_cursors_answer_every_named_topic_invalid_request(start):
    _target, bootstrap = start(1, [TopicSpec("a", 2, 1), TopicSpec("b", 1, 1)])
    for names, cursor in ((["a", "b"], ("c", 0)),       # the cursor's topic not named
                          (["b", "a", "b"], ("a", -1)), # a negative partition index
                          (["a"], ("", 0))):            # "" names no topic either
        r = _describe(bootstrap, names, cursor=cursor)
        assert [(t.name, t.error_code, t.partitions, bytes(t.topic_id), t.is_internal, t.topic_authorized_operations)
                for t in r.topics] == [(n, 42, [], bytes(16), False, NO_OPS) for n in names]
        assert r.next_cursor is None
    # all topics with a negative partition index: no topic to answer
    r = _describe(bootstrap, cursor=("a", -1))
    assert (r.topics, r.next_cursor) == ([], None)
    # without a cursor a topic named "" fails the request: Kafka 4.3.1 takes "" for the cursor's
    # topic and reads the absent cursor (UNKNOWN_SERVER_ERROR, measured); with one it is illegal
    r = _describe(bootstrap, ["b", "", "b"])
    assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [("b", -1, []), ("", -1, []), ("b", -1, [])]
    r = _describe(bootstrap, ["b", ""], cursor=("", 0))
    assert _listed(r) == [("", 17, []), ("b", 0, [0])]


def test_the_broker_caps_the_partitions_of_an_answer(broker_factory):
    b = broker_factory({"max.request.partition.size.limit": "3"})
    C = API["CreateTopics"].Request
    with RawConnection(b.bootstrap) as conn:
        r = conn.request("CreateTopics", 7, C(timeout_ms=10000, validate_only=False, topics=[
            C.CreatableTopic(name="wide", num_partitions=5, replication_factor=1)]))
        assert [t.error_code for t in r.topics] == [0]
        r = _describe(b.bootstrap, ["wide"], limit=2000, conn=conn)
        assert (_listed(r), _cursor(r)) == ([("wide", 0, [0, 1, 2])], ("wide", 3))
        r = _describe(b.bootstrap, ["wide"], limit=2000, cursor=("wide", 3), conn=conn)
        assert (_listed(r), _cursor(r)) == ([("wide", 0, [3, 4])], None)


def test_acls_hide_or_refuse_topics(broker_factory):
    """Alice may READ t1 (so DESCRIBE it), nothing on t2: all topics lists t1 only; named, t2
    and a topic that does not exist alike are TOPIC_AUTHORIZATION_FAILED, after the others."""
    from confluent_kafka.admin import AclOperation, AdminClient, ResourceType

    from .test_acls import SECURED, _acl, _ask, _conf, _create_topic, _grant

    b = broker_factory(SECURED)
    for t in ("t1", "t2"):
        _create_topic(b.bootstrap, t)
    _grant(AdminClient(_conf(b, "admin")), _acl(ResourceType.TOPIC, "t1", "alice", AclOperation.READ))

    def ask(user, names=(), **kw):
        body = dict(topics=[Q.TopicRequest(name=n) for n in names], response_partition_limit=2000, cursor=None)
        return _ask(b.bootstrap, user, "DescribeTopicPartitions", 0, **{**body, **kw})

    read_describe = (1 << 3) | (1 << 8)
    r = ask("alice")
    assert [(t.name, t.error_code, t.topic_authorized_operations) for t in r.topics] == [("t1", 0, read_describe)]
    r = ask("alice", ["t2", "t1", "missing"])
    assert _listed(r)[0] == ("t1", 0, [0])
    assert sorted((t.name, t.error_code, bytes(t.topic_id), t.topic_authorized_operations) for t in r.topics[1:]) == [
        ("missing", 29, bytes(16), NO_OPS), ("t2", 29, bytes(16), NO_OPS)]
    r = ask("admin")
    assert [(t.name, t.topic_authorized_operations) for t in r.topics] == [("t1", ALL_TOPIC_OPS),
                                                                          ("t2", ALL_TOPIC_OPS)]
    # a refused topic is reported even when the partition limit ends the answer before it
    r = ask("alice", ["t1", "t2"], response_partition_limit=1)
    assert [(t.name, t.error_code) for t in r.topics] == [("t1", 0), ("t2", 29)] and r.next_cursor is None


def test_three_nodes_offline_replicas(start):
    """On a 3-node cluster the answer agrees with Metadata's, before and after a broker dies
    (its replicas offline, out of the ISR, no partition error)."""
    target, _bootstrap = start(3, [TopicSpec("r", 3, 3)])
    M = API["Metadata"].Request
    victim, asked = target.node_ids()[-1], target.node_ids()[0]
    address = "%s:%d" % target.addresses[asked]

    def both():
        with RawConnection(address) as conn:
            m = conn.request("Metadata", 12, M(topics=[M.MetadataRequestTopic(name="r", topic_id=bytes(16))],
                                               allow_auto_topic_creation=False,
                                               include_topic_authorized_operations=False))
            d = _describe(address, ["r"], conn=conn)
        return ([(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
                 for p in m.topics[0].partitions],
                [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
                 for p in d.topics[0].partitions], d)

    meta, desc, d = both()
    assert meta == desc and len(desc) == 3 and all(sorted(p[3]) == [1, 2, 3] and p[5] == [] for p in desc)
    assert {p.error_code for p in d.topics[0].partitions} == {0}
    assert d.topics[0].topic_authorized_operations == ALL_TOPIC_OPS
    target.kill(victim)
    deadline = time.monotonic() + 60
    while True:
        try:
            meta, desc, d = both()
        except (ConnectionError, OSError):
            meta, desc = None, None
        if desc and all(p[5] == [victim] and victim not in p[4] for p in desc) and meta == desc:
            break
        assert time.monotonic() < deadline, (meta, desc)
        time.sleep(0.5)
    assert {p.error_code for p in d.topics[0].partitions} == {0}
