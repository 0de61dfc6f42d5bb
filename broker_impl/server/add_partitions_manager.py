"""Kafka's AddPartitionsToTxnManager: before the first transactional batch of a producer lands on
a partition (or its offsets on ``__consumer_offsets``), the partition's leader asks the
transactional id's coordinator whether the partition is in the transaction (KIP-890 part 1:
AddPartitionsToTxn v5, ``verify_only``) or has it added (part 2, TV2: Produce v12+ and
TxnOffsetCommit v5+ add the partition implicitly).

The coordinator is the leader of the id's ``__transaction_state`` partition, wherever it is --
this broker included: the request always goes over the network, on the coordinator's
advertised listener, with Kafka's client id ``AddPartitionsManager-client-<id>``, so a proxy sees
it as it sees Kafka's. No coordinator known yet reads COORDINATOR_NOT_AVAILABLE, no answer
NETWORK_EXCEPTION; the caller maps them (TransactionCoordinator.verification_error_for_produce for
Produce, verification_error_for_txn_offset_commit for TxnOffsetCommit, as Kafka's ReplicaManager
and group coordinator do), and a TV2 Produce retries CONCURRENT_TRANSACTIONS for a while first.
"""

from __future__ import annotations

from ..coordinators.transaction_log import TRANSACTION_STATE_TOPIC
from ..protocol.errors import Errors
from ..protocol.messages import API
from ..cluster.network_client import InterBrokerClient, NetworkError

VERSION = 5


class AddPartitionsToTxnManager:
    def __init__(self, broker):
        self.broker = broker
        self.client = InterBrokerClient(broker.replica_manager.endpoint,
                                         f"AddPartitionsManager-client-{broker.node_id}", discover_versions=True)
        self.timeout_s = broker.config.int("request.timeout.ms") / 1000.0

    def coordinator_of(self, transactional_id: str) -> int | None:
        topic = self.broker.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        part = topic.partitions[self.broker.txn_coordinator.txn_manager.partition_for(transactional_id)]
        return part.leader if self.broker.replica_manager.broker_alive(part.leader) else None

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, tp: tuple[str, int],
                     add: bool) -> Errors:
        """The coordinator's answer for ``tp`` (NONE: it is in the transaction now)."""
        node = self.coordinator_of(transactional_id)
        if node is None:
            return Errors.COORDINATOR_NOT_AVAILABLE
        R = API["AddPartitionsToTxn"].Request
        T = R.AddPartitionsToTxnTransaction
        req = R(transactions=[T(transactional_id=transactional_id, producer_id=producer_id,
                                producer_epoch=producer_epoch, verify_only=not add,
                                topics=[T.AddPartitionsToTxnTopic(name=tp[0], partitions=[tp[1]])])])
        try:
            resp = await self.client.send(node, "AddPartitionsToTxn", VERSION, req, self.timeout_s)
        except NetworkError:
            return Errors.NETWORK_EXCEPTION
        if resp.error_code != Errors.NONE:
            return Errors(resp.error_code)
        for result in resp.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) == tp:
                        return Errors(p.partition_error_code)
        return Errors.UNKNOWN_SERVER_ERROR
