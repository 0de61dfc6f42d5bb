"""ACLs end to end (cluster/authorizer, handlers/acls): an embedded broker with Kafka's
StandardAuthorizer over SASL_PLAINTEXT, librdkafka (confluent-kafka) as the clients. ``admin`` is
a super user; ``alice`` and ``bob`` get what each test grants them through CreateAcls.

They run against Apache Kafka too (but what needs a broker of their own: a restart, no
authorizer): a 4.3.1 node (process.roles=broker,controller) with a SASL_PLAINTEXT listener
(SCRAM-SHA-512, also the inter-broker listener, sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
and the admin's JAAS login), a PLAINTEXT controller listener,
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer,
super.users=User:admin;User:ANONYMOUS (the controller listener's principal), users admin, alice
and bob (``kafka-storage format --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]'``
...): ``KCONFORM_ACL_KAFKA=127.0.0.1:PORT pytest tests/integration/broker/test_acls.py``.
"""

from __future__ import annotations

import os
import time
import uuid
from types import SimpleNamespace

import pytest

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,  # noqa: E402
                                   AdminClient, ResourcePatternType, ResourceType)

from broker_impl.codec import API  # noqa: E402
from broker_impl.log.records import build_batch  # noqa: E402

from .rawclient import RawConnection  # noqa: E402
from .sasl_raw import login  # noqa: E402

USERS = "admin:admin-secret,alice:alice-secret,bob:bob-secret"
SECURED = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
           "kconform.sasl.users": USERS,
           "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:admin"}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
E = ck.KafkaError


def _conf(b, user: str, **extra) -> dict:
    return {"bootstrap.servers": b.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": f"{user}-secret", **extra}


def _grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for f in admin.create_acls(list(bindings), request_timeout=15).values():
        assert f.result(timeout=20) is None


def _acl(rtype, name, user, op, perm=ALLOW, pattern=LITERAL) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, perm)


KAFKA = os.environ.get("KCONFORM_ACL_KAFKA")


@pytest.fixture
def secured(broker_factory):
    b = SimpleNamespace(bootstrap=KAFKA) if KAFKA else broker_factory(SECURED)
    admin = AdminClient(_conf(b, "admin"))
    return b, admin


def _names() -> tuple[str, str, str]:
    s = uuid.uuid4().hex[:8]
    return f"t-{s}", f"tx-{s}", f"g-{s}"


def test_transactional_id_without_write_is_refused_at_init_transactions(secured):
    b, admin = secured
    topic, txn, _ = _names()
    p = ck.Producer(_conf(b, "alice", **{"transactional.id": txn, "linger.ms": 0}))
    with pytest.raises(ck.KafkaException) as exc:
        p.init_transactions(20)
    assert exc.value.args[0].code() == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # granted WRITE on the transactional id and on the topic: the same user commits
    _grant(admin, _acl(ResourceType.TRANSACTIONAL_ID, txn, "alice", AclOperation.WRITE),
           _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    admin_p = ck.Producer(_conf(b, "admin"))      # the topic, created by a user allowed to
    admin_p.produce(topic, value=b"first")
    assert admin_p.flush(20) == 0
    p = ck.Producer(_conf(b, "alice", **{"transactional.id": txn, "linger.ms": 0}))
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"in-txn")
    assert p.flush(20) == 0
    p.commit_transaction(20)
    # ListTransactions lists the transactional ids one may DESCRIBE (WRITE implies it)
    for user, listed in (("alice", True), ("bob", False)):
        r = _ask(b.bootstrap, user, "ListTransactions", 1, state_filters=[], producer_id_filters=[], duration_filter=-1)
        assert (r.error_code, txn in [x.transactional_id for x in r.transaction_states]) == (0, listed), user


def test_write_on_the_transactional_id_revoked_mid_transaction(secured):
    """Revoked between produce and commit (measured the same on Kafka 4.3.1): librdkafka's commit
    fails with a fatal TRANSACTIONAL_ID_AUTHORIZATION_FAILED, so does its abort; the transaction
    stays Ongoing until the coordinator aborts it at transaction.timeout.ms (its own markers need
    no ACL), and the record is never read_committed."""
    b, admin = secured
    topic, txn, _ = _names()
    _grant(admin, _acl(ResourceType.TRANSACTIONAL_ID, txn, "alice", AclOperation.WRITE),
           _acl(ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    p = ck.Producer(_conf(b, "admin"))
    p.produce(topic, value=b"before")
    assert p.flush(20) == 0
    p = ck.Producer(_conf(b, "alice", **{"transactional.id": txn, "linger.ms": 0, "transaction.timeout.ms": 2000}))
    p.init_transactions(20)
    p.begin_transaction()
    p.produce(topic, value=b"in-txn")
    assert p.flush(20) == 0
    revoke = AclBindingFilter(ResourceType.TRANSACTIONAL_ID, txn, ResourcePatternType.LITERAL, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
    assert len(next(iter(admin.delete_acls([revoke], request_timeout=15).values())).result(timeout=20)) == 1
    time.sleep(1)   # Kafka applies an ACL change once its metadata log is replayed
    for end in (p.commit_transaction, p.abort_transaction):
        with pytest.raises(ck.KafkaException) as exc:
            end(20)
        assert (exc.value.args[0].code(), exc.value.args[0].fatal()) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, True)

    def state():
        r = _ask(b.bootstrap, "admin", "DescribeTransactions", 0, transactional_ids=[txn])
        return [(x.error_code, x.transaction_state) for x in r.transaction_states]

    assert state() == [(0, "Ongoing")]
    deadline = time.monotonic() + 40     # Kafka looks for timed-out transactions every 10 s
    while state() != [(0, "CompleteAbort")] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert state() == [(0, "CompleteAbort")]
    c = ck.Consumer(_conf(b, "admin", **{"group.id": f"g-{txn}", "auto.offset.reset": "earliest",
                                         "isolation.level": "read_committed", "enable.auto.commit": False}))
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 20
    try:
        while not got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        while time.monotonic() < deadline - 15:     # anything else, until 5 s after the start
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == [b"before"]


def test_topic_without_write_fails_the_produce(secured):
    b, admin = secured
    topic, _, _ = _names()
    _grant(admin, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.READ))   # READ is not WRITE
    reports: list = []
    p = ck.Producer(_conf(b, "admin"))
    p.produce(topic, value=b"x")
    assert p.flush(20) == 0
    p = ck.Producer(_conf(b, "alice", **{"linger.ms": 0, "message.timeout.ms": 15000, "enable.idempotence": False}))
    p.produce(topic, value=b"y", on_delivery=lambda err, msg: reports.append(err))
    p.flush(20)
    assert reports and reports[0] is not None and reports[0].code() == E.TOPIC_AUTHORIZATION_FAILED


def test_consumer_needs_read_on_the_group(secured):
    b, admin = secured
    topic, _, group = _names()
    p = ck.Producer(_conf(b, "admin"))
    for i in range(3):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(20) == 0
    _grant(admin, _acl(ResourceType.TOPIC, topic, "bob", AclOperation.READ))

    def consume(limit_s: float = 20):
        """What bob reads, the errors he gets, and the offsets he then commits (OffsetCommit)."""
        got, errors, committed = [], [], None
        c = ck.Consumer(_conf(b, "bob", **{"group.id": group, "auto.offset.reset": "earliest",
                                          "enable.auto.commit": False}))
        c.subscribe([topic])
        deadline = time.monotonic() + limit_s
        try:
            while len(got) < 3 and not errors and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is None:
                    continue
                (errors if m.error() else got).append(m.error() or m.value())
            if got:
                committed = [(tp.topic, tp.offset, tp.error) for tp in c.commit(asynchronous=False)]
        finally:
            c.close()
        return got, errors, committed

    got, errors, _ = consume()
    assert got == [] and [e.code() for e in errors] == [E.GROUP_AUTHORIZATION_FAILED]
    _grant(admin, _acl(ResourceType.GROUP, group, "bob", AclOperation.READ))
    assert consume() == ([b"v0", b"v1", b"v2"], [], [(topic, 3, None)])
    # ListGroups: without DESCRIBE on the cluster, the groups one may DESCRIBE (READ implies it)
    for user, listed in (("bob", True), ("alice", False)):
        r = _ask(b.bootstrap, user, "ListGroups", 4, states_filter=[])
        assert (r.error_code, group in [g.group_id for g in r.groups]) == (0, listed), user


def test_create_describe_delete_acls_through_the_admin_client(secured):
    b, admin = secured
    s = uuid.uuid4().hex[:8]      # names of this test's own (Kafka's ACLs outlive a test)
    carol = f"carol-{s}"
    bindings = [_acl(ResourceType.TOPIC, f"orders-{s}", carol, AclOperation.READ),
                _acl(ResourceType.TOPIC, f"pay-{s}-", carol, AclOperation.WRITE, DENY, PREFIXED),
                _acl(ResourceType.GROUP, f"g-{s}", carol, AclOperation.ALL)]
    _grant(admin, *bindings)
    every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{carol}", None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(every, request_timeout=15).result(timeout=20))) == \
        sorted(map(str, bindings))
    match = AclBindingFilter(ResourceType.TOPIC, f"pay-{s}-eu", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert [str(x) for x in admin.describe_acls(match, request_timeout=15).result(timeout=20)] == [str(bindings[1])]
    # a user without ALTER on the cluster may not create any
    alice = AdminClient(_conf(b, "alice"))
    fut = next(iter(alice.create_acls([bindings[0]], request_timeout=15).values()))
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(timeout=20)
    assert exc.value.args[0].code() == E.CLUSTER_AUTHORIZATION_FAILED
    # nor describe them without DESCRIBE on the cluster (confluent-kafka 2.16.1 reads that answer
    # as an empty list: its top-level error is not raised, hence the raw request)
    with RawConnection(b.bootstrap) as conn:
        login(conn, "SCRAM-SHA-512", "alice", "alice-secret")
        r = conn.request("DescribeAcls", 3, API["DescribeAcls"].Request(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1))
        assert (r.error_code, r.resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    topic_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, f"User:{carol}", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    deleted = next(iter(admin.delete_acls([topic_filter], request_timeout=15).values())).result(timeout=20)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings[:2]))
    assert [str(x) for x in admin.describe_acls(every, request_timeout=15).result(timeout=20)] == [str(bindings[2])]
    if KAFKA:
        return
    # kept across a restart (acls.json in the data directory)
    b.stop()
    b.start()
    admin = AdminClient(_conf(b, "admin"))
    assert [str(x) for x in admin.describe_acls(every, request_timeout=15).result(timeout=20)] == [str(bindings[2])]


def _ask(bootstrap: str, user: str, api: str, version: int, **body):
    """One request on a connection of its own, logged in as ``user``; None: closed unanswered."""
    with RawConnection(bootstrap) as conn:
        login(conn, "SCRAM-SHA-512", user, f"{user}-secret")
        conn.sock.settimeout(10)
        try:
            return conn.request(api, version, API[api].Request(**body))
        except ConnectionError:
            return None


def _create_topic(bootstrap: str, topic: str, limit_s: float = 15) -> None:
    """Auto-created by the super user's Metadata, then waited for until it answers with its
    partitions (Kafka's metadata cache follows its controller)."""
    MT = API["Metadata"].Request.MetadataRequestTopic
    deadline = time.monotonic() + limit_s
    while True:
        r = _ask(bootstrap, "admin", "Metadata", 12, topics=[MT(name=topic, topic_id=bytes(16))],
                 allow_auto_topic_creation=True, include_topic_authorized_operations=False)
        if [(t.error_code, len(t.partitions)) for t in r.topics] == [(0, 1)]:
            return
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def _creation(**kw):
    d = dict(resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:a", host="*", operation=3,
             permission_type=3)
    return API["CreateAcls"].Request.AclCreation(**{**d, **kw})


def _results(r):
    return None if r is None else [(x.error_code, x.error_message) for x in r.results]


def test_authorized_operations_in_metadata_and_describe_groups(secured):
    """Metadata's topic (v8+) and cluster (v8-10) authorized operations when asked: a super user's
    are every supported operation, alice's (READ on the topic) READ and DESCRIBE, and 0 for the
    cluster she may not DESCRIBE; a topic refused carries none."""
    b, admin = secured
    s = uuid.uuid4().hex[:8]
    topic = f"t-{s}"
    MT = API["Metadata"].Request.MetadataRequestTopic
    _create_topic(b.bootstrap, topic)
    _grant(admin, _acl(ResourceType.TOPIC, topic, "alice", AclOperation.READ))
    read_describe, everything = (1 << 3) | (1 << 8), 3576
    for user, cluster, ops, other in (("admin", 8096, everything, (3, everything)),
                                      ("alice", 0, read_describe, (29, -2**31))):
        for v in (8, 10, 12):
            kw = {"include_cluster_authorized_operations": True} if v <= 10 else {}
            r = _ask(b.bootstrap, user, "Metadata", v, allow_auto_topic_creation=False,
                     include_topic_authorized_operations=True, **kw,
                     topics=[MT(name=n, topic_id=bytes(16)) for n in (topic, f"{topic}-none")])
            assert (r.cluster_authorized_operations if v <= 10 else cluster,
                    [(t.error_code, t.topic_authorized_operations) for t in r.topics]) == (
                cluster, [(0, ops), other]), (user, v)
        r = _ask(b.bootstrap, user, "Metadata", 12, allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False, topics=[MT(name=topic, topic_id=bytes(16))])
        assert [t.topic_authorized_operations for t in r.topics] == [-2**31]


def test_password_configs_are_described_without_their_value(secured):
    """DescribeConfigs of a broker (a super user may) never carries a PASSWORD config's value."""
    b, _ = secured
    keys = ["ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key",
            "ssl.keystore.certificate.chain", "ssl.truststore.certificates", "sasl.enabled.mechanisms"]
    r = _ask(b.bootstrap, "admin", "DescribeConfigs", 4, include_synonyms=False, include_documentation=False,
             resources=[API["DescribeConfigs"].Request.DescribeConfigsResource(resource_type=4, resource_name="1",
                                                                              configuration_keys=keys)])
    assert sorted((c.name, c.value, c.is_sensitive) for c in r.results[0].configs) == sorted(
        [(k, None, True) for k in keys[:-1]] + [("sasl.enabled.mechanisms", "SCRAM-SHA-512", False)])


def test_raw_errors_of_the_acl_apis(broker_factory):
    """Kafka 4.3.1's answers to bindings and filters it refuses (measured, handlers/acls)."""
    if not KAFKA:
        plain = broker_factory()
        with RawConnection(plain.bootstrap) as conn:
            r = conn.request("DescribeAcls", 3, API["DescribeAcls"].Request(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
                host_filter=None, operation=1, permission_type=1))
            assert (r.error_code, r.error_message) == (54, "No Authorizer is configured.")
    boot = KAFKA or broker_factory(SECURED, name="secured").bootstrap
    s = uuid.uuid4().hex[:8]

    def create(*creations, user="admin"):
        return _results(_ask(boot, user, "CreateAcls", 3, creations=list(creations)))

    def names(name):
        r = _ask(boot, "admin", "DescribeAcls", 3, resource_type_filter=2, resource_name_filter=name,
                 pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1, permission_type=1)
        return (r.error_code, r.error_message, [x.resource_name for x in r.resources])

    assert create(_creation(resource_type=4, resource_name="other", operation=7)) == [
        (42, "The only valid name for the CLUSTER resource is kafka-cluster")]
    assert create(_creation(resource_name="")) == [(42, "Invalid empty resource name")]
    assert create(_creation(principal="alice")) == [(42, "Could not parse principal from `alice` (no colon is present "
                                                         "separating the principal type from the principal name)")]
    assert create(_creation(resource_type=99)) == [(42, "Invalid resourceType UNKNOWN")]
    assert create(_creation(resource_pattern_type=99)) == [(42, "Invalid patternType UNKNOWN")]
    assert create(_creation(operation=99)) == [(42, "Invalid operation UNKNOWN")]
    for kw in ({"resource_type": 0}, {"resource_pattern_type": 0}, {"operation": 0}, {"permission_type": 0}):
        assert create(_creation(**kw)) is None, kw                    # closed, no answer
    # ANY or MATCH anywhere: every result UNKNOWN_SERVER_ERROR, none created
    for kw in ({"resource_type": 1}, {"resource_pattern_type": 1}, {"resource_pattern_type": 2}, {"operation": 1},
               {"permission_type": 1}):
        assert create(_creation(**kw), _creation(resource_name=f"{s}-a")) == [(-1, None), (-1, None)], kw
    assert names(f"{s}-a") == (0, "", [])
    # a refused binding beside a valid one: that one is created
    assert create(_creation(resource_name=f"{s}-b"), _creation(resource_name="")) == [
        (0, ""), (42, "Invalid empty resource name")]
    assert names(f"{s}-b") == (0, "", [f"{s}-b"])
    assert create(_creation(resource_name=f"{s}-c"), user="alice")[0][0] == 31
    # filters: an unknown code matches nothing, UNKNOWN (0) closes the connection
    for kw, answer in (({"resource_type_filter": 99}, (0, "", [])), ({"operation": 99}, (0, "", [])),
                       ({"pattern_type_filter": 0}, None)):
        r = _ask(boot, "admin", "DescribeAcls", 3, **{**dict(
            resource_type_filter=2, resource_name_filter=f"{s}-b", pattern_type_filter=1, principal_filter=None,
            host_filter=None, operation=1, permission_type=1), **kw})
        assert (r if r is None else (r.error_code, r.error_message, r.resources)) == answer, kw


def test_raw_refusals_of_the_transaction_and_group_apis(secured):
    """What Kafka 4.3.1 answers a user without ACLs (measured): the errors, per API and version,
    that KafkaApis gives before the coordinators are asked."""
    b, admin = secured
    s = uuid.uuid4().hex[:8]
    topic, txn, group = f"t-{s}", f"tx-{s}", f"g-{s}"
    MT = API["Metadata"].Request.MetadataRequestTopic
    _create_topic(b.bootstrap, topic)

    def ask(api, version, user="alice", **body):
        return _ask(b.bootstrap, user, api, version, **body)

    # Metadata: a topic refused or to be created without CREATE, no id, no partitions
    for v in (1, 4, 12):
        kw = {"topics": [MT(name=topic, topic_id=bytes(16)), MT(name=f"{topic}-new", topic_id=bytes(16))]}
        if v >= 4:
            kw["allow_auto_topic_creation"] = True
        r = ask("Metadata", v, **kw)
        assert [(t.error_code, t.name, bytes(t.topic_id), t.partitions) for t in r.topics] == [
            (29, topic, bytes(16), []), (29, f"{topic}-new", bytes(16), [])], v
    # FindCoordinator: Errors' message before v4, none in the batched answer
    r = ask("FindCoordinator", 3, key=group, key_type=0)
    assert (r.error_code, r.error_message, r.node_id) == (30, "Group authorization failed.", -1)
    r = ask("FindCoordinator", 3, key=txn, key_type=1)
    assert (r.error_code, r.error_message) == (53, "Transactional Id authorization failed.")
    r = ask("FindCoordinator", 6, key_type=1, coordinator_keys=[txn])
    assert [(c.error_code, c.error_message, c.node_id) for c in r.coordinators] == [(53, "", -1)]
    for v in (1, 4, 5):
        r = ask("InitProducerId", v, transactional_id=txn, transaction_timeout_ms=60000, producer_id=-1,
                producer_epoch=-1)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (53, -1, -1), v
    # idempotent: neither IDEMPOTENT_WRITE on the cluster nor WRITE on any topic (bob only ever reads)
    r = ask("InitProducerId", 5, user="bob", transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1)
    assert (r.error_code, r.producer_id) == (31, -1)
    assert ask("AddOffsetsToTxn", 3, transactional_id=txn, producer_id=1, producer_epoch=0,
               group_id=group).error_code == 53
    for v in (3, 5):
        r = ask("EndTxn", v, transactional_id=txn, producer_id=1, producer_epoch=0, committed=True)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (53, -1, -1)
    AP = API["AddPartitionsToTxn"].Request
    r = ask("AddPartitionsToTxn", 3, v3_and_below_transactional_id=txn, v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0, v3_and_below_topics=[AP.AddPartitionsToTxnTopic(name=topic, partitions=[0])])
    assert [(t.name, [(p.partition_index, p.partition_error_code) for p in t.results_by_partition])
            for t in r.results_by_topic_v3_and_below] == [(topic, [(0, 53)])]
    r = ask("AddPartitionsToTxn", 5, transactions=[AP.AddPartitionsToTxnTransaction(
        transactional_id=txn, producer_id=1, producer_epoch=0, verify_only=True,
        topics=[AP.AddPartitionsToTxnTopic(name=topic, partitions=[0])])])
    assert (r.error_code, r.results_by_transaction) == (31, [])
    TO = API["TxnOffsetCommit"].Request.TxnOffsetCommitRequestTopic
    r = ask("TxnOffsetCommit", 3, transactional_id=txn, group_id=group, producer_id=1, producer_epoch=0,
            generation_id=-1, member_id="", group_instance_id=None, topics=[TO(name=topic, partitions=[
                TO.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                   committed_metadata="")])])
    assert [[p.error_code for p in t.partitions] for t in r.topics] == [[53]]
    WM = API["WriteTxnMarkers"].Request.WritableTxnMarker
    r = ask("WriteTxnMarkers", 1, markers=[WM(producer_id=1, producer_epoch=0, transaction_result=True,
                                              coordinator_epoch=0,
                                              topics=[WM.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
    assert [[p.error_code for t in m.topics for p in t.partitions] for m in r.markers] == [[31]]
    PR = API["Produce"].Request.TopicProduceData
    for txn_id, transactional, error in ((txn, True, 53), (None, False, 29)):
        batch = build_batch([(None, b"v", [], int(time.time() * 1000))], producer_id=1, producer_epoch=0,
                            base_sequence=0, is_transactional=transactional, base_timestamp=int(time.time() * 1000))
        r = ask("Produce", 9, transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[PR(
            name=topic, partition_data=[PR.PartitionProduceData(index=0, records=batch)])])
        assert [(p.index, p.error_code, p.base_offset) for t in r.responses for p in t.partition_responses] == [
            (0, error, -1)], transactional
    LT = API["ListOffsets"].Request.ListOffsetsTopic
    r = ask("ListOffsets", 7, replica_id=-1, isolation_level=0, topics=[LT(name=topic, partitions=[
        LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    assert [(p.error_code, p.offset) for t in r.topics for p in t.partitions] == [(29, -1)]
    FT = API["Fetch"].Request.FetchTopic
    r = ask("Fetch", 12, replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1000, isolation_level=0, session_id=0,
            session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[FT(topic=topic, partitions=[
                FT.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                  log_start_offset=-1, partition_max_bytes=1000)])])
    assert [(p.error_code, p.high_watermark) for t in r.responses for p in t.partitions] == [(29, -1)]
    r = ask("OffsetFetch", 7, group_id=group, topics=None, require_stable=False)
    assert (r.error_code, r.topics) == (30, [])
    OF = API["OffsetFetch"].Request.OffsetFetchRequestTopic
    r = ask("OffsetFetch", 1, group_id=group, topics=[OF(name=topic, partition_indexes=[0])])
    assert [(p.error_code, p.committed_offset) for t in r.topics for p in t.partitions] == [(30, -1)]
    OC = API["OffsetCommit"].Request.OffsetCommitRequestTopic
    r = ask("OffsetCommit", 8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[OC(name=topic, partitions=[OC.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])])
    assert [[p.error_code for p in t.partitions] for t in r.topics] == [[30]]
    assert ask("Heartbeat", 4, group_id=group, generation_id=1, member_id="m", group_instance_id=None).error_code == 30
    JG = API["JoinGroup"].Request.JoinGroupRequestProtocol
    for v, protocol_name in ((5, ""), (9, None)):
        r = ask("JoinGroup", v, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                group_instance_id=None, protocol_type="consumer", protocols=[JG(name="range", metadata=b"")],
                **({"reason": None} if v >= 8 else {}))
        assert (r.error_code, r.generation_id, r.protocol_name, r.member_id, r.leader) == (
            30, -1, protocol_name, "", "")
    r = ask("SyncGroup", 5, group_id=group, generation_id=1, member_id="m", group_instance_id=None,
            protocol_type="consumer", protocol_name="range", assignments=[])
    assert (r.error_code, r.protocol_type, r.protocol_name, r.assignment) == (30, None, None, b"")
    for v in (0, 5):
        r = ask("DescribeGroups", v, groups=[group, f"{group}-2"], include_authorized_operations=True)
        assert [(g.error_code, g.group_id, g.group_state, g.authorized_operations) for g in r.groups] == [
            (30, group, "", -2**31), (30, f"{group}-2", "", -2**31)]
    r = ask("DescribeGroups", 5, user="admin", groups=[group], include_authorized_operations=True)
    assert [(g.error_code, g.group_state, g.authorized_operations) for g in r.groups] == [(0, "Dead", 3400)]
    r = ask("DeleteGroups", 2, groups_names=[group, group])
    assert [(x.group_id, x.error_code) for x in r.results] == [(group, 30)]
    DP = API["DescribeProducers"].Request.TopicRequest
    r = ask("DescribeProducers", 0, topics=[DP(name=topic, partition_indexes=[0]),
                                            DP(name=f"{topic}-new", partition_indexes=[0])])
    assert [(t.name, [(p.error_code, p.error_message) for p in t.partitions]) for t in r.topics] == [
        (topic, [(29, "Topic authorization failed.")]), (f"{topic}-new", [(29, "Topic authorization failed.")])]
    r = ask("DescribeTransactions", 0, transactional_ids=[txn])
    assert [(x.error_code, x.transactional_id, x.transaction_state, x.producer_id, x.topics)
            for x in r.transaction_states] == [(53, txn, "", 0, [])]
    r = ask("ListTransactions", 1, user="bob", state_filters=[], producer_id_filters=[], duration_filter=-1)
    assert (r.error_code, r.transaction_states) == (0, [])        # bob may DESCRIBE no transactional id
    # CreateTopics / DeleteTopics: answered in another order by Kafka (its hash sets), hence sorted
    CT = API["CreateTopics"].Request.CreatableTopic
    names = (f"{topic}-new", topic)
    r = ask("CreateTopics", 7, timeout_ms=5000, validate_only=False, topics=[
        CT(name=n, num_partitions=1, replication_factor=1, assignments=[], configs=[]) for n in names])
    assert sorted((t.name, t.error_code, t.error_message, t.topic_config_error_code, t.num_partitions,
                   t.replication_factor, t.configs) for t in r.topics) == [
        (n, 29, "Authorization failed.", 0, -1, -1, []) for n in sorted(names)]
    DT = API["DeleteTopics"].Request.DeleteTopicState
    r = ask("DeleteTopics", 6, timeout_ms=5000, topics=[DT(name=n, topic_id=bytes(16)) for n in names])
    assert sorted((t.name, t.error_code, t.error_message) for t in r.responses) == [
        (n, 29, "Topic authorization failed.") for n in sorted(names)]
    r = ask("DeleteTopics", 3, timeout_ms=5000, topic_names=[topic])
    assert [(t.name, t.error_code) for t in r.responses] == [(topic, 29)]
    OD = API["OffsetDelete"].Request.OffsetDeleteRequestTopic
    r = ask("OffsetDelete", 0, group_id=group, topics=[OD(name=topic, partitions=[
        OD.OffsetDeleteRequestPartition(partition_index=0)])])
    assert (r.error_code, r.topics) == (30, [])
    DC = API["DescribeConfigs"].Request.DescribeConfigsResource
    r = ask("DescribeConfigs", 4, include_synonyms=False, include_documentation=False, resources=[
        DC(resource_type=2, resource_name=topic, configuration_keys=None),
        DC(resource_type=4, resource_name="1", configuration_keys=None)])
    assert [(x.error_code, x.error_message, x.configs) for x in r.results] == [
        (29, "Topic authorization failed.", []), (31, "Cluster authorization failed.", [])]
    OE = API["OffsetForLeaderEpoch"].Request.OffsetForLeaderTopic
    r = ask("OffsetForLeaderEpoch", 4, replica_id=-1, topics=[OE(topic=topic, partitions=[OE.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    assert [(t.topic, [(p.error_code, p.leader_epoch, p.end_offset) for p in t.partitions]) for t in r.topics] == [
        (topic, [(29, -1, -1)])]
    LG = API["LeaveGroup"].Request
    r = ask("LeaveGroup", 5, group_id=group, members=[LG.MemberIdentity(member_id="m", group_instance_id=None,
                                                                         reason=None)])
    assert (r.error_code, r.members) == (30, [])


def test_a_cluster_shares_its_acls_through_the_controller(tmp_path):
    """Three embedded brokers with the authorizer: CreateAcls sent to one broker is forwarded to
    the controller and reaches every broker (each answers DescribeAcls with it, and the broker
    that coordinates a transactional id enforces it: InitProducerId refused there); DeleteAcls
    through another broker answers what it removed and every broker forgets it; a restarted
    broker has the ACLs from the metadata image."""
    from conformance.targets.embedded import EmbeddedTarget
    from conformance.targets.topology import Topology

    D, C, X, I = (API[n].Request for n in ("DescribeAcls", "CreateAcls", "DeleteAcls", "InitProducerId"))
    deny = dict(resource_type=5, resource_name="txn-c", resource_pattern_type=3, principal="User:*", host="*",
                operation=4, permission_type=2)
    target = EmbeddedTarget()
    try:
        target.start(Topology(nodes=3, topics=[]), {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}, tmp_path / "c")
        addresses = [f"{h}:{p}" for _, (h, p) in target.live_addresses()]

        def listed(address: str) -> int:
            with RawConnection(address) as conn:
                r = conn.request("DescribeAcls", 2, D(resource_type_filter=5, resource_name_filter="txn-c",
                                                      pattern_type_filter=3, principal_filter=None, host_filter=None,
                                                      operation=1, permission_type=1))
            return sum(len(res.acls) for res in r.resources)

        def every_broker_lists(n: int) -> bool:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if all(listed(a) == n for a in target_addresses()):
                    return True
                time.sleep(0.2)
            return False

        def target_addresses():
            return [f"{h}:{p}" for _, (h, p) in target.live_addresses()]

        def init_error() -> int:
            """InitProducerId for txn-c on each broker until one is its coordinator (the others
            answer NOT_COORDINATOR)."""
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                for address in target_addresses():
                    with RawConnection(address) as conn:
                        r = conn.request("InitProducerId", 4, I(transactional_id="txn-c", transaction_timeout_ms=60000,
                                                                producer_id=-1, producer_epoch=-1))
                    if r.error_code not in (14, 15, 16):   # load in progress, not available, not coordinator
                        return r.error_code
                time.sleep(0.2)
            raise AssertionError("no broker coordinates txn-c")

        with RawConnection(addresses[0]) as conn:
            r = conn.request("CreateAcls", 3, C(creations=[C.AclCreation(**deny)]))
        assert [x.error_code for x in r.results] == [0]
        assert every_broker_lists(1)
        assert init_error() == 53   # TRANSACTIONAL_ID_AUTHORIZATION_FAILED, from its coordinator
        node = target.node_ids()[-1]
        target.restart(node)
        assert every_broker_lists(1)
        with RawConnection(target_addresses()[1]) as conn:
            r = conn.request("DeleteAcls", 3, X(filters=[X.DeleteAclsFilter(
                resource_type_filter=5, resource_name_filter="txn-c", pattern_type_filter=3, principal_filter=None,
                host_filter=None, operation=1, permission_type=2)]))
        assert [(m.resource_name, m.operation, m.permission_type) for m in r.filter_results[0].matching_acls] == \
            [("txn-c", 4, 2)]
        assert every_broker_lists(0)
        assert init_error() == 0
    finally:
        target.stop()
