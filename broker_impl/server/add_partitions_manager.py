"""Kafka's AddPartitionsToTxnManager: before the first transactional batch of a producer lands on
a partition (or its offsets on ``__consumer_offsets``), the partition's leader asks the
transactional id's coordinator -- for all such partitions of a request in one AddPartitionsToTxn,
as Kafka's verifyTransaction -- whether the partition is in the transaction (KIP-890 part 1:
AddPartitionsToTxn v5, ``verify_only``) or has it added (part 2, TV2: Produce v12+ and
TxnOffsetCommit v5+ add the partition implicitly).

The coordinator is the leader of the id's ``__transaction_state`` partition, wherever it is --
this broker included: the request goes to the coordinator's advertised listener (in-process when
that is this broker's own, nothing in between: cluster/network_client), with Kafka's client id ``AddPartitionsManager-client-<id>``, so a proxy sees
it as it sees Kafka's. No coordinator known yet reads COORDINATOR_NOT_AVAILABLE, no answer
NETWORK_EXCEPTION. The answer is mapped as Kafka's manager maps it for its caller; the caller
maps it again for its request: ReplicaManager for Produce (and retries a TV2 Produce's
CONCURRENT_TRANSACTIONS for a while first), the group coordinator's rule for TxnOffsetCommit
(coordinators/group_store ``operation_error_to_response``).
"""

from __future__ import annotations

from ..cluster.append import TransactionSupportedOperation
from ..cluster.network_client import InterBrokerClient, NetworkError
from ..cluster.topics import by_topic
from ..coordinators.transaction_log import TRANSACTION_STATE_TOPIC
from ..protocol.errors import Errors
from ..protocol.messages import API

VERSION = 5


class AddPartitionsToTxnManager:
    def __init__(self, broker):
        self.broker = broker
        self.client = InterBrokerClient(broker.replica_manager.inter_broker_endpoint,
                                         f"AddPartitionsManager-client-{broker.node_id}", discover_versions=True,
                                         local=broker.local_requests)
        self.timeout_s = broker.config.int("request.timeout.ms") / 1000.0
        #: transaction.partition.verification.enable: KIP-890 part 1 for the older versions
        self.verification_enabled = broker.config.bool("transaction.partition.verification.enable")

    def verifies(self, operation: TransactionSupportedOperation) -> bool:
        """Whether a request at ``operation`` is verified at all: TV2 always (it adds the
        partition), the older versions when verification is enabled."""
        return operation.supports_epoch_bump or self.verification_enabled

    def coordinator_of(self, transactional_id: str) -> int | None:
        topic = self.broker.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return None
        part = topic.partitions[self.broker.txn_coordinator.txn_manager.partition_for(transactional_id)]
        return part.leader if self.broker.replica_manager.broker_alive(part.leader) else None

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[tuple[str, int]],
                     operation: TransactionSupportedOperation) -> dict[tuple[str, int], Errors]:
        """The coordinator's answer for each of ``partitions`` (NONE: it is in the transaction
        now), asked in one AddPartitionsToTxn as Kafka's verifyTransaction asks for a request's
        partitions, and handed on as the manager hands it: PRODUCER_FENCED as
        INVALID_PRODUCER_EPOCH (what producers handle there), and for the oldest clients
        (DEFAULT_ERROR) TRANSACTION_ABORTABLE as INVALID_TXN_STATE."""
        answers = await self._ask(transactional_id, producer_id, producer_epoch, partitions,
                                  add=operation.supports_epoch_bump)
        return {tp: self._for_caller(err, operation) for tp, err in answers.items()}

    @staticmethod
    def _for_caller(err: Errors, operation: TransactionSupportedOperation) -> Errors:
        if err == Errors.PRODUCER_FENCED:
            return Errors.INVALID_PRODUCER_EPOCH
        if err == Errors.TRANSACTION_ABORTABLE and operation is TransactionSupportedOperation.DEFAULT_ERROR:
            return Errors.INVALID_TXN_STATE
        return err

    async def _ask(self, transactional_id: str, producer_id: int, producer_epoch: int,
                   partitions: list[tuple[str, int]], add: bool) -> dict[tuple[str, int], Errors]:
        node = self.coordinator_of(transactional_id)
        if node is None:
            return dict.fromkeys(partitions, Errors.COORDINATOR_NOT_AVAILABLE)
        R = API["AddPartitionsToTxn"].Request
        T = R.AddPartitionsToTxnTransaction
        req = R(transactions=[T(transactional_id=transactional_id, producer_id=producer_id,
                                producer_epoch=producer_epoch, verify_only=not add,
                                topics=[T.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                        for t, ps in by_topic(partitions).items()])])
        try:
            resp = await self.client.send(node, "AddPartitionsToTxn", VERSION, req, self.timeout_s)
        except NetworkError:
            return dict.fromkeys(partitions, Errors.NETWORK_EXCEPTION)
        if resp.error_code != Errors.NONE:
            return dict.fromkeys(partitions, Errors(resp.error_code))
        answered = {(t.name, p.partition_index): Errors(p.partition_error_code)
                    for result in resp.results_by_transaction for t in result.topic_results
                    for p in t.results_by_partition}
        return {tp: answered.get(tp, Errors.UNKNOWN_SERVER_ERROR) for tp in partitions}
