"""Real applications as cases: unmodified programs from released artifacts, run against a target
behind the row's proxy, verifying exactly-once themselves (docs/applications.md).

A case with an `application:` section (dsl/model.ApplicationDef) runs one of them instead of
steps; the row's checks are the application's own verdict (no loss, no duplicate, order where
promised) and its summary (Row.application) what it measured: the figures, the faults and when
they landed, the error codes per API that crossed the wire.

- transactions.py: Kafka's tests/kafkatest/tests/core/transactions_test.py -- VerifiableProducer,
  one TransactionalMessageCopier per input partition, read_committed ConsoleConsumers -- under
  clean and hard bounces of brokers or of the copiers.
- tools.py: a Java tool of org.apache.kafka:kafka-tools as a process whose stdout is kept.

The names of the applications and the client their rows carry live with the case model
(dsl/model.APPLICATIONS, APPLICATION_CLIENT), which the loader and the runner read without
importing the applications themselves.
"""
