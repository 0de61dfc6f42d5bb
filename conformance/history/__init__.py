"""What happened during a workload, and what is wrong with it.

Jepsen's method, for Kafka's exactly-once guarantees: every operation a workload's clients
start is recorded when it is invoked and again when it completes (`history`); after the run a
checker reads that history beside the final state of the topics (`checker`) and names each
anomaly with the operations that prove it; the error codes that crossed the wire are counted
per API and held against what may happen outside a fault (`profile`); `timeline` draws it all.

Nothing here starts a process or opens a socket: the workload engine
(conformance/runner/workload_run.py) records, these modules judge.
"""
from .checker import ANOMALIES, Anomaly, check
from .history import History

__all__ = ["ANOMALIES", "Anomaly", "History", "check"]
