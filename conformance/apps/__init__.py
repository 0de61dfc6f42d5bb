"""Real applications as cases: unmodified programs from released artifacts, run against a target
behind the row's proxy, verifying exactly-once themselves (docs/applications.md).

A case with an `application:` section (dsl/model.ApplicationDef) runs one of them instead of
steps; the row's checks are the application's own verdict (no loss, no duplicate, order where
promised) and its summary (Row.application) what it measured: the figures, the faults and when
they landed, the error codes per API that crossed the wire.

- transactions.py: Kafka's tests/kafkatest/tests/core/transactions_test.py -- VerifiableProducer,
  one TransactionalMessageCopier per input partition, read_committed ConsoleConsumers -- under
  clean and hard bounces of brokers or of the copiers.
- streams_smoke.py: Kafka Streams' tests/kafkatest/tests/streams/streams_smoke_test.py --
  StreamsSmokeTest's driver and three processors of its topology, the first two killed or
  stopped while the driver's data flows.
- streams_bounce.py: Kafka Streams' tests/kafkatest/tests/streams/streams_broker_bounce_test.py --
  the smoke test's driver and one processor while the leader of one partition is chased, stopped
  or killed and started again five times.
- connect_eos.py: a Kafka Connect worker with exactly-once source support (KIP-618) running
  Kafka's FileStreamSourceConnector, killed and started again while it copies, or riding out
  bounces of its output's leader.
- flink_eos.py: a Flink job, KafkaSource -> KafkaSink EXACTLY_ONCE (its Java source in flink/),
  a task failure, then the job killed and restored from its last checkpoint -- or the job left
  alone while its output's leader is chased.
- base.py: ApplicationRun, what every one of them is to its row, and a broker bounce (the node
  stopped or killed and started again, the ISR awaited whole).
- tools.py: a Java program (kafka-tools, or a test program by its class) as a process whose
  stdout is kept; the error codes an application row counts.

The names of the applications and the client their rows carry live with the case model
(dsl/model.APPLICATIONS, APPLICATION_CLIENT), which the loader and the runner read without
importing the applications themselves; `run_class` is how the runner finds the one a case names.
"""
from __future__ import annotations

from .connect_eos import ConnectEosRun
from .flink_eos import FlinkEosRun
from .streams_bounce import StreamsBrokerBounceRun
from .streams_smoke import StreamsSmokeRun
from .transactions import TransactionsTestRun

RUNS = {"transactions_test": TransactionsTestRun, "streams_smoke": StreamsSmokeRun,
        "streams_broker_bounce": StreamsBrokerBounceRun,
        "connect_eos_source": ConnectEosRun, "flink_eos": FlinkEosRun}


def run_class(kind: str):
    """The class whose run() plays an application of `kind` (dsl/model.APPLICATIONS)."""
    return RUNS[kind]
