"""A one-node broker starts and stops as Kafka's combined node does.

Why: measured on Apache Kafka 4.3.1, one node, a clean stop leaves every partition leaderless
and resigns the coordinators some 80 ms before the port closes, and a start opens the port
before the partitions are led and the coordinators loaded. Clients of a restarting node
therefore see LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE (workloads on Kafka: Metadata LEADER_NOT_AVAILABLE 19.6 per 1000
operations), and their retry paths run; the embedded broker, which loaded everything before it
listened and stopped at once, answered none of them."""
from __future__ import annotations

import trio
import trio.testing

from broker_impl.codec import API, RESPONSE_HEADER
from broker_impl.config import BrokerConfig
from broker_impl.log.records import build_batch
from broker_impl.protocol.errors import Errors
from broker_impl.server.broker import Broker


async def _ask(port: int, api_name: str, version: int, body):
    api = API[api_name]
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(api.request_frame(version, 7, "lifecycle-test", body))
        data = b""
        with trio.fail_after(10):
            while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
                chunk = await stream.receive_some(1 << 16)
                assert chunk, "the broker closed the connection"
                data += chunk
    header, pos = RESPONSE_HEADER.decode(api.response_header_version(version), data, 4)
    assert header.correlation_id == 7
    return api.response.decode(version, data, pos)[0]


def _broker(tmp_path) -> Broker:
    return Broker(BrokerConfig({"offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3"}),
                  tmp_path / "data", port=0)


def test_a_clean_stop_first_leaves_every_partition_leaderless_and_resigns_the_coordinators(tmp_path):
    M, P, F, I = (API[n].Request for n in ("Metadata", "Produce", "FindCoordinator", "InitProducerId"))

    async def main():
        broker = _broker(tmp_path)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(broker.serve)
            broker.topics.create("t1", 1, {})
            broker.topics.create("__transaction_state", 3, {})
            init = I(transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
            for _ in range(100):                       # the coordinator loads at start
                if (await _ask(port, "InitProducerId", 4, init)).error_code == Errors.NONE:
                    break
                await trio.sleep(0.05)
            else:
                raise AssertionError("InitProducerId never succeeded")
            nursery.start_soon(broker.shutdown)
            await trio.testing.wait_all_tasks_blocked()   # shutdown has resigned, waits for its recheck
            md = await _ask(port, "Metadata", 12, M(topics=[M.MetadataRequestTopic(name="t1", topic_id=bytes(16))],
                                                    allow_auto_topic_creation=False,
                                                    include_topic_authorized_operations=False))
            [part] = md.topics[0].partitions
            assert (part.error_code, part.leader_id, part.leader_epoch) == (Errors.LEADER_NOT_AVAILABLE, -1, 1)
            produce = await _ask(port, "Produce", 9, P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
                P.TopicProduceData(name="t1", partition_data=[P.TopicProduceData.PartitionProduceData(
                    index=0, records=build_batch([(None, b"v")]))])]))
            assert produce.responses[0].partition_responses[0].error_code == Errors.NOT_LEADER_OR_FOLLOWER
            found = await _ask(port, "FindCoordinator", 4, F(key_type=1, coordinator_keys=["tx"]))
            assert found.coordinators[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE
            assert (await _ask(port, "InitProducerId", 4, init)).error_code == Errors.NOT_COORDINATOR
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_a_start_over_an_existing_log_is_fenced_until_unfenced_two_epochs_on(tmp_path):
    broker = _broker(tmp_path)
    broker.open()
    broker.topics.create("t1", 2, {})
    assert [p.leader_epoch for p in broker.topics.get("t1").partitions] == [0, 0]
    broker.close()
    broker = _broker(tmp_path)
    broker.topics.load()
    try:
        parts = broker.topics.get("t1").partitions
        assert [(p.leader, p.leader_epoch, p.is_leader) for p in parts] == [(-1, 1, False)] * 2
        assert parts[0].leader_error() == Errors.NOT_LEADER_OR_FOLLOWER
        trio.run(broker.topics.unfence)
        assert [(p.leader, p.leader_epoch, p.is_leader) for p in parts] == [(broker.node_id, 2, True)] * 2
    finally:
        broker.close()
    broker = _broker(tmp_path)                   # the next start moves on from the recorded epoch
    broker.open()
    try:
        assert [p.leader_epoch for p in broker.topics.get("t1").partitions] == [4, 4]
    finally:
        broker.close()
