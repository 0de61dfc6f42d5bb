"""ElectLeaders at the controller (QuorumController.elect_leaders, as Kafka's
ReplicationControlManager.electLeaders): preferred and unclean elections, their errors per
partition, the null (every partition) form, and the metadata log moving only when a leader
changed. The wire answers are measured against Kafka 4.3.1 by cases/wire/elect_leaders_answers
and cases/cluster/elect_leaders_*."""

from __future__ import annotations

import pytest

from broker_impl.cluster.metadata_image import NO_LEADER
from broker_impl.protocol.errors import Errors, KafkaError

from tests.unit.cluster.test_quorum_controller import _beat, _cluster, _controller

E = Errors


def _codes(results):
    return {name: [(i, err) for i, err, _msg in parts] for name, parts in results}


def test_preferred_election_moves_leadership_back_to_the_first_replica(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 3, {})           # replicas [1, 2, 3]
    assert _codes(c.elect_leaders(True, [("t1", [0])])) == {"t1": [(0, E.ELECTION_NOT_NEEDED)]}
    _beat(c, 2.0, 2, 3)
    c.tick(3.5)                               # broker 1 fenced: 2 leads, 1 leaves the ISR
    p = c.image.partition("t1", 0)
    assert (p.leader, p.isr) == (2, [2, 3])
    # 1 is back but not in the ISR yet: its election is not possible
    err, epoch = c.register_broker(1, "a2", "127.0.0.1", 9001, now=3.6)
    c.heartbeat(1, epoch, c.image.offset, False, now=3.6)
    assert _codes(c.elect_leaders(True, [("t1", [0])])) == {"t1": [(0, E.PREFERRED_LEADER_NOT_AVAILABLE)]}
    e2 = c.image.brokers[2].broker_epoch
    p = c.image.partition("t1", 0)
    assert c.alter_partition(2, e2, "t1", 0, p.leader_epoch, p.partition_epoch, [1, 2, 3], now=3.7)[0] == E.NONE
    assert c.image.partition("t1", 0).leader == 2      # caught up, still not leading
    before = c.image.offset
    results = c.elect_leaders(True, [("t1", [0])], now=3.8)
    assert results == [("t1", [(0, E.NONE, None)])]
    p = c.image.partition("t1", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (1, [1, 2, 3], 2) and c.image.offset == before + 1
    assert _codes(c.elect_leaders(True, [("t1", [0])])) == {"t1": [(0, E.ELECTION_NOT_NEEDED)]}
    assert c.image.offset == before + 1       # nothing changed, nothing committed


def test_unclean_election_of_an_offline_partition_whatever_the_topic_says(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 2, {"unclean.leader.election.enable": "false"})   # replicas [1, 2]
    _beat(c, 2.0, 1, 3)
    c.tick(3.5)                               # broker 2 fenced: out of the ISR
    err, epoch = c.register_broker(2, "b2", "127.0.0.1", 9002, now=3.6)
    c.heartbeat(2, epoch, c.image.offset, False, now=3.6)     # back, out of sync
    assert _codes(c.elect_leaders(False, [("t1", [0])], now=3.7)) == {"t1": [(0, E.ELECTION_NOT_NEEDED)]}
    _beat(c, 5.0, 2, 3)
    c.tick(5.5)                               # the leader, the last ISR member, goes
    assert c.image.partition("t1", 0).leader == NO_LEADER
    assert _codes(c.elect_leaders(True, [("t1", [0])], now=5.6)) == {"t1": [(0, E.PREFERRED_LEADER_NOT_AVAILABLE)]}
    assert c.elect_leaders(False, [("t1", [0])], now=5.6) == [("t1", [(0, E.NONE, None)])]
    p = c.image.partition("t1", 0)
    assert (p.leader, p.isr, p.leader_epoch) == (2, [2], 2)


def test_unclean_election_without_an_alive_replica(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 1, 1, {})            # replicas [1]
    _beat(c, 2.0, 2, 3)
    c.tick(3.5)
    results = c.elect_leaders(False, [("t1", [0])], now=3.6)
    assert _codes(results) == {"t1": [(0, E.ELIGIBLE_LEADERS_NOT_AVAILABLE)]} and results[0][1][0][2]


def test_unknown_partitions_and_the_null_form(tmp_path):
    c = _cluster(tmp_path)
    c.create_topic("t1", 2, 2, {})
    c.create_topic("t2", 1, 1, {})
    results = c.elect_leaders(True, [("t1", [1, 9]), ("nope", [0])])
    assert results == [("t1", [(1, E.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."),
                                (9, E.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t1-9")]),
                       ("nope", [(0, E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")])]
    # null: every topic, without the partitions that needed no election
    assert c.elect_leaders(True, None) == [("t1", []), ("t2", [])]
    _beat(c, 2.0, 2, 3)
    c.tick(3.5)                               # broker 1 goes: t1/0 (replicas [1, 2]) moves to 2
    assert _codes(c.elect_leaders(True, None, now=3.6)) == {"t1": [(0, E.PREFERRED_LEADER_NOT_AVAILABLE)], "t2": []}


def test_no_election_without_a_quorum(tmp_path):
    c = _controller(tmp_path, quorum_nodes=(1, 2, 3))
    with pytest.raises(KafkaError) as exc:
        c.elect_leaders(True, None, now=100.0)
    assert exc.value.error == E.REQUEST_TIMED_OUT
