"""The words every layer of kconform shares: what a target can do, where its quorum runs, which
node a fault names, what a fault does.

Why a leaf module: the case language (conformance/dsl) validates these words, the targets
declare them, the runner acts on them and the reports show them. When each layer defined its
own copy, the layers imported each other to stay in step (dsl <-> targets, dsl <-> runner),
and function-local imports hid the cycles. Here they are defined once, and this module imports
nothing of conformance; the fault points themselves are the broker's own list
(broker_impl.faults), because the broker is where they exist.
"""
from __future__ import annotations

from broker_impl.faults import ACTIONS as POINT_ACTIONS
from broker_impl.faults import POINTS

#: Capabilities a target may declare. Process control ones are static; the API ones are
#: discovered from ApiVersions once the target runs (an API a node lists is one it serves).
CAPABILITIES: dict[str, str] = {
    "kill": "SIGKILL of one node",
    "pause": "SIGSTOP / SIGCONT of one node",
    "restart": "start a node again with the same data and ports",
    "stop_node": "clean (SIGTERM) shutdown of one node",
    "multi_node": "a topology of more than one node",
    "dedicated_controller": "the metadata quorum on a node of its own (topology.controller: dedicated)",
    "fault_points": "named fault points inside the broker's code (the embedded broker)",
    "describe_transactions": "the DescribeTransactions API",
    "list_transactions": "the ListTransactions API",
    "describe_producers": "the DescribeProducers API",
    "transactions": "InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit",
    "wire_markers": "the coordinator sends WriteTxnMarkers over the network (a proxy sees them)",
    "txn_verification": "the partition leader verifies a transactional Produce with the coordinator over the "
                        "network (KIP-890 part 1: AddPartitionsToTxn between brokers, a proxy sees it)",
}

#: Where the cluster's metadata quorum (KRaft controllers) runs. "combined": on the broker nodes
#: themselves (fewest processes; killing a majority of the nodes also loses the quorum);
#: "dedicated": on a node of its own that no fault touches, so any number of brokers can die
#: while the cluster can still elect leaders and shrink ISRs -- what S23 (2 of 3 brokers down)
#: and S30 (unclean leader election) need.
CONTROLLER_PLACEMENTS = ("combined", "dedicated")

#: Node roles a fault can name. The runner asks the target who holds the role *now*.
#: `follower`: the first replica of a partition (in Metadata's replica order) that is not its
#: leader -- the node that falls behind in "followers lag" scenarios (S30).
#: `not_coordinator` (with `node: N`): the N-th node, in node id order, that is not the
#: TransactionCoordinator of the transactional.id -- "kill two brokers, but not the coordinator"
#: (S23), whose outcome depends on whether the coordinator keeps its in-memory state.
NODE_ROLES = ("coordinator", "group_coordinator", "leader", "follower", "not_coordinator", "node")

#: What a node fault does to the node, and the target capability each needs.
NODE_ACTIONS: dict[str, str] = {
    "crash": "kill",
    "pause": "pause",
    "resume": "pause",
    "restart": "restart",
    "stop": "stop_node",
    # `hold` at a protocol point: only the coroutine there waits (the broker's own `hold`), the
    # rest of the node keeps answering -- "the coordinator stuck in PrepareCommit while the
    # client retries"; `release` lets it go on. Both exist only as fault points.
    "hold": "fault_points",
    "release": "fault_points",
}
#: Node actions that exist only at a protocol point (`at:` required).
POINT_ONLY_ACTIONS = ("hold",)

#: Protocol points a node fault may wait for (`at:`), with where each lies: the broker's own
#: fault points. Only targets with the `fault_points` capability realise them exactly.
PROTOCOL_POINTS: dict[str, str] = dict(POINTS)

#: Node actions that may wait for a protocol point (`at:`): those the broker can do there
#: (broker_impl.faults.ACTIONS): `crash` is its own os._exit, `pause` the whole process
#: SIGSTOPping itself right after it said so, `hold` the one coroutine at the point waiting
#: until `release`.
TRIGGERED_ACTIONS = tuple(a for a in POINT_ACTIONS if a in NODE_ACTIONS)

#: ACL resource names Kafka gives one meaning in every row: the wildcard and the cluster's name.
#: The runner never makes them unique (raw.NAME_KEPT), so ACLs on them are broker-wide state.
BROKER_WIDE_NAMES = frozenset({"*", "kafka-cluster"})
