"""The controller's decisions (broker_impl.cluster.controller.QuorumController), driven with an
explicit clock: registration and fencing, elections (clean, none, unclean), ISR changes by
AlterPartition with their epoch checks, the combined topology's quorum, durability."""

from __future__ import annotations

from broker_impl.cluster.controller import QuorumController
from broker_impl.cluster.metadata_image import NO_LEADER
from broker_impl.config import BrokerConfig
from broker_impl.protocol.errors import Errors, KafkaError

SESSION_S = 3.0


def _controller(tmp_path, quorum_nodes=(), **configs) -> QuorumController:
    cfg = BrokerConfig({"broker.session.timeout.ms": str(int(SESSION_S * 1000)), **configs})
    return QuorumController(cfg, tmp_path / "ctl", frozenset(quorum_nodes))


def _cluster(tmp_path, n=3, **kw) -> QuorumController:
    """n registered, unfenced brokers at time 0."""
    c = _controller(tmp_path, **kw)
    for b in range(1, n + 1):
        err, epoch = c.register_broker(b, f"inc-{b}", "127.0.0.1", 9000 + b, now=0.0)
        assert err == Errors.NONE
        assert c.heartbeat(b, epoch, c.image.offset, False, now=0.0) == (Errors.NONE, False, False)
    return c


def _beat(c: QuorumController, now: float, *brokers: int) -> None:
    for b in brokers:
        reg = c.image.brokers[b]
        c.heartbeat(b, reg.broker_epoch, c.image.offset, False, now=now)


def test_registration_starts_fenced_until_the_broker_caught_up(tmp_path):
    c = _controller(tmp_path)
    err, epoch = c.register_broker(1, "a", "127.0.0.1", 9001, now=0.0)
    assert err == Errors.NONE and c.image.brokers[1].fenced
    assert c.heartbeat(1, epoch, epoch - 1, False, now=0.1)[1] is True      # not caught up yet
    assert c.heartbeat(1, epoch, epoch, False, now=0.2)[1] is False
    assert c.register_broker(1, "a", "127.0.0.1", 9001, now=0.3) == (Errors.NONE, epoch)   # a retry
    assert c.heartbeat(1, epoch - 1, epoch, False, now=0.4)[0] == Errors.STALE_BROKER_EPOCH


def test_create_topic_places_replicas_and_refuses_too_high_replication(tmp_path):
    c = _cluster(tmp_path)
    t = c.create_topic("t1", 3, 3, {})
    assert [p.replicas for p in t.partitions] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    assert [(p.leader, p.isr, p.leader_epoch) for p in t.partitions][0] == (1, [1, 2, 3], 0)
    try:
        c.create_topic("t2", 1, 4, {})
    except KafkaError as exc:
        assert exc.error == Errors.INVALID_REPLICATION_FACTOR
        assert "only 3 broker(s) are registered" in exc.message
    else:
        raise AssertionError("replication 4 on 3 brokers was accepted")
    try:
        c.create_topic("t1", 1, 1, {})
    except KafkaError as exc:
        assert exc.error == Errors.TOPIC_ALREADY_EXISTS


def test_session_expiry_fences_and_moves_leaders_keeping_the_last_isr_member(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 2, {})           # replicas [1, 2], leader 1
    _beat(c, 2.0, 2, 3)
    c.tick(2.5)
    assert c.image.partition("t1", 0).leader == 1
    c.tick(3.5)                               # broker 1 silent for 3.5 s
    p = c.image.partition("t1", 0)
    assert c.image.brokers[1].fenced
    assert (p.leader, p.isr, p.leader_epoch) == (2, [2], 1)
    _beat(c, 5.0, 3)
    c.tick(6.1)                               # broker 2 goes too: the last ISR member stays
    p = c.image.partition("t1", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (NO_LEADER, [2], 2)
    # broker 1 (out of sync) comes back: no clean leader
    err, epoch = c.register_broker(1, "a2", "127.0.0.1", 9001, now=6.2)
    c.heartbeat(1, epoch, c.image.offset, False, now=6.2)
    assert c.image.partition("t1", 0).leader == NO_LEADER
    # broker 2 (the last in sync) comes back: it leads again
    err, epoch = c.register_broker(2, "b2", "127.0.0.1", 9002, now=6.3)
    c.heartbeat(2, epoch, c.image.offset, False, now=6.3)
    p = c.image.partition("t1", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (2, [2], 3)


def test_unclean_election_only_when_the_topic_allows_it(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 2, {"unclean.leader.election.enable": "true"})   # replicas [1, 2]
    e1 = c.image.brokers[1].broker_epoch
    p = c.image.partition("t1", 0)
    assert c.alter_partition(1, e1, "t1", 0, p.leader_epoch, p.partition_epoch, [1], now=0.5)[0] == Errors.NONE
    _beat(c, 2.0, 1, 3)
    c.tick(3.5)                               # broker 2 (out of ISR already) fenced
    _beat(c, 4.0, 3)
    c.tick(5.5)                               # the leader goes: no ISR member left
    # broker 2 returns: an unclean election makes it the leader and the whole ISR
    err, epoch = c.register_broker(2, "b2", "127.0.0.1", 9002, now=5.6)
    c.heartbeat(2, epoch, c.image.offset, False, now=5.6)
    p = c.image.partition("t1", 0)
    assert (p.leader, p.isr) == (2, [2])


def test_restart_within_the_session_fences_the_old_incarnation(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 3, {})
    err, epoch = c.register_broker(1, "a-restarted", "127.0.0.1", 9001, now=1.0)
    p = c.image.partition("t1", 0)
    assert c.image.brokers[1].fenced and p.leader == 2 and p.isr == [2, 3]


def test_alter_partitions_answers_each_item_and_commits_the_batch_once(tmp_path):
    """A leader's pending ISR changes in one AlterPartition (Kafka's AlterPartitionManager):
    one metadata change for the batch, each item answered by its own checks."""
    c = _cluster(tmp_path)
    for name in ("t1", "t2", "t3"):
        c.create_topic(name, 1, 3, {})
    published: list[int] = []
    c.listeners.append(lambda image: published.append(image.offset))
    leaders = {n: c.image.partition(n, 0).leader for n in ("t1", "t2", "t3")}
    lead = leaders["t1"]
    mine = [n for n, leader in leaders.items() if leader == lead]
    epoch = c.image.brokers[lead].broker_epoch
    items = [(n, 0, c.image.partition(n, 0).leader_epoch, c.image.partition(n, 0).partition_epoch, [lead])
             for n in mine]
    items.append(("t1", 0, 99, 0, [lead]))                # a stale leader epoch: refused alone
    items.append(("nope", 0, 0, 0, [lead]))
    results = c.alter_partitions(lead, epoch, items, now=0.1)
    assert [e for e, _ in results[:len(mine)]] == [Errors.NONE] * len(mine)
    assert [e for e, _ in results[len(mine):]] == [Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION]
    assert all(c.image.partition(n, 0).isr == [lead] for n in mine)
    assert len(published) == 1                            # one commit for the batch
    assert c.alter_partitions(lead, epoch - 1, items[:1], now=0.2)[0][0] == Errors.STALE_BROKER_EPOCH
    assert len(published) == 1                            # nothing changed, nothing committed


def test_alter_partition_epoch_checks(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 3, {})
    e1 = c.image.brokers[1].broker_epoch
    p = c.image.partition("t1", 0)
    err, reg = c.alter_partition(1, e1, "t1", 0, p.leader_epoch, p.partition_epoch, [1, 3], now=0.1)
    assert err == Errors.NONE and reg.isr == [1, 3] and reg.partition_epoch == p.partition_epoch + 1
    stale = c.alter_partition(1, e1, "t1", 0, p.leader_epoch, p.partition_epoch, [1], now=0.2)
    assert stale[0] == Errors.INVALID_UPDATE_VERSION
    assert c.alter_partition(1, e1, "t1", 0, p.leader_epoch - 1, reg.partition_epoch, [1], now=0.2)[0] \
        == Errors.FENCED_LEADER_EPOCH
    assert c.alter_partition(1, e1 - 1, "t1", 0, p.leader_epoch, reg.partition_epoch, [1], now=0.2)[0] \
        == Errors.STALE_BROKER_EPOCH
    # a fenced broker cannot join the ISR
    _beat(c, 2.0, 1, 3)
    c.tick(3.5)
    assert c.image.brokers[2].fenced
    reg = c.image.partition("t1", 0)
    assert c.alter_partition(1, e1, "t1", 0, reg.leader_epoch, reg.partition_epoch, [1, 2, 3], now=3.6)[0] \
        == Errors.INELIGIBLE_REPLICA


def test_controlled_shutdown_lets_go_once_every_other_active_broker_reported_the_move(tmp_path):
    """The leaderships move at the first heartbeat asking to shut down; the broker may stop only
    once every other active broker's heartbeat reported the metadata offset of that change
    (Kafka's lowest active offset): its own offset does not count, a fenced broker does not
    hold it back, and a broker that died unfenced holds it back until its session expires."""
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 3, {})
    e1 = c.image.brokers[1].broker_epoch
    before = c.image.offset
    assert c.heartbeat(1, e1, before, True, now=0.5) == (Errors.NONE, False, False)
    p = c.image.partition("t1", 0)
    moved = c.image.offset
    assert p.leader == 2 and 1 not in p.isr and moved > before
    assert c.heartbeat(1, e1, moved, True, now=0.6) == (Errors.NONE, False, False)   # 2 and 3 have not told
    c.heartbeat(2, c.image.brokers[2].broker_epoch, moved, False, now=0.7)
    assert c.heartbeat(1, e1, moved, True, now=0.8) == (Errors.NONE, False, False)   # 3 has not
    c.heartbeat(3, c.image.brokers[3].broker_epoch, moved - 1, False, now=0.9)
    assert c.heartbeat(1, e1, moved, True, now=1.0) == (Errors.NONE, False, False)   # 3 is behind
    c.heartbeat(3, c.image.brokers[3].broker_epoch, moved, False, now=1.1)
    assert c.heartbeat(1, e1, before, True, now=1.2) == (Errors.NONE, False, True)   # its own offset aside
    # a new incarnation of the broker starts over
    c.register_broker(1, "inc-1-again", "127.0.0.1", 9001, now=1.5)
    assert 1 not in c.shutdown_offsets


def test_controlled_shutdown_waits_for_a_dead_unfenced_broker_to_be_fenced(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 3, {})
    e1 = c.image.brokers[1].broker_epoch
    c.heartbeat(1, e1, c.image.offset, True, now=0.5)
    moved = c.image.offset
    c.heartbeat(2, c.image.brokers[2].broker_epoch, moved, False, now=0.6)   # broker 3 died before it heard
    assert c.heartbeat(1, e1, moved, True, now=2.0)[2] is False
    _beat(c, 3.0, 1, 2)
    c.tick(SESSION_S + 0.5)
    assert c.image.brokers[3].fenced
    assert c.heartbeat(1, e1, c.image.offset, True, now=SESSION_S + 0.6)[2] is True


def test_controlled_shutdown_of_the_last_active_broker_is_let_go_at_once(tmp_path):
    c = _cluster(tmp_path, n=2)
    c.create_topic("t1", 1, 2, {})
    e1, e2 = c.image.brokers[1].broker_epoch, c.image.brokers[2].broker_epoch
    c.heartbeat(1, e1, c.image.offset, True, now=0.5)
    c.heartbeat(2, e2, c.image.offset, True, now=0.5)          # both stop together: nobody is active
    assert c.heartbeat(1, e1, c.image.offset, True, now=0.6)[2] is True
    assert c.heartbeat(2, e2, c.image.offset, True, now=0.6)[2] is True


def test_combined_quorum_needs_a_majority_of_the_nodes(tmp_path):
    c = _controller(tmp_path, quorum_nodes=(1, 2, 3))
    assert c.register_broker(1, "a", "127.0.0.1", 9001, now=0.0)[0] == Errors.REQUEST_TIMED_OUT
    assert c.register_broker(2, "b", "127.0.0.1", 9002, now=0.1)[0] == Errors.NONE
    assert c.register_broker(1, "a", "127.0.0.1", 9001, now=0.2)[0] == Errors.NONE
    # only node 1 still beats: no quorum, nobody is fenced, nothing can be created
    for b in (1, 2):
        c.heartbeat(b, c.image.brokers[b].broker_epoch, c.image.offset, False, now=0.3)
    _beat(c, 3.0, 1)
    c.tick(4.0)
    assert not c.image.brokers[2].fenced
    try:
        c.create_topic("t1", 1, 1, {}, now=4.0)
    except KafkaError as exc:
        assert exc.error == Errors.REQUEST_TIMED_OUT
    else:
        raise AssertionError("a controller without quorum created a topic")


def test_the_image_survives_a_restart_and_producer_ids_never_repeat(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 2, 2, {"min.insync.replicas": "2"})
    e1 = c.image.brokers[1].broker_epoch
    assert c.allocate_producer_ids(1, e1, now=0.1) == (Errors.NONE, 0, 1000)
    again = _controller(tmp_path)
    assert again.image.offset == c.image.offset
    assert again.image.topics["t1"].configs == {"min.insync.replicas": "2"}
    assert again.allocate_producer_ids(1, e1, now=0.1)[1] == 1000
