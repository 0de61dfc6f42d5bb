'use strict'
/**
 * Java client properties (what cases write) -> KafkaJS options.
 *
 * Why a table: KafkaJS spreads its settings over four places -- the Kafka client (brokers,
 * clientId, requestTimeout, retry), the producer or consumer factory, consumer.run(), and each
 * send() (acks, timeout) -- and validates none of them: an unknown option is silently ignored. So
 * the driver maps every key it knows and refuses every other one (INVALID_ARGUMENT naming it),
 * never passing a setting through that KafkaJS would drop. Keys with no KafkaJS equivalent
 * (delivery.timeout.ms, max.block.ms, ...) are refused the same way; group.instance.id with why.
 */

const { OpError } = require('./protocol')
const { ASSIGNERS } = require('./assigners')

const int = key => raw => {
  const n = Number(raw)
  if (!Number.isInteger(n)) throw new OpError('INVALID_ARGUMENT', `${key}=${JSON.stringify(raw)}: not an integer`)
  return n
}

const bool = key => raw => {
  const s = String(raw).trim().toLowerCase()
  if (s !== 'true' && s !== 'false') throw new OpError('INVALID_ARGUMENT', `${key}=${JSON.stringify(raw)}: not true|false`)
  return s === 'true'
}

const acks = raw => {
  const s = String(raw).trim().toLowerCase()
  if (s === 'all' || s === '-1') return -1
  if (s === '1' || s === '0') return Number(s)
  throw new OpError('INVALID_ARGUMENT', `acks=${JSON.stringify(raw)}: not all|-1|0|1`)
}

const offsetReset = raw => {
  const s = String(raw).trim().toLowerCase()
  if (s === 'earliest') return true
  if (s === 'latest') return false
  throw new OpError('INVALID_ARGUMENT', `auto.offset.reset=${JSON.stringify(raw)}: KafkaJS knows earliest|latest (fromBeginning) only`)
}

const isolation = raw => {
  const s = String(raw).trim().toLowerCase()
  if (s === 'read_committed') return false
  if (s === 'read_uncommitted') return true
  throw new OpError('INVALID_ARGUMENT', `isolation.level=${JSON.stringify(raw)}: not read_committed|read_uncommitted`)
}

// key -> [where, KafkaJS option, converter]. where: client (new Kafka), retry (client's retry),
// producer / consumer (the factory), run (consumer.run), send (each send), subscribe.
// Java's built-in assignor classes (partition.assignment.strategy's values) -> the JoinGroup
// protocol name each sends. Java loads the class named and knows no short name.
const JAVA_ASSIGNORS = {
  'org.apache.kafka.clients.consumer.RangeAssignor': 'range',
  'org.apache.kafka.clients.consumer.RoundRobinAssignor': 'roundrobin',
  'org.apache.kafka.clients.consumer.StickyAssignor': 'sticky',
  'org.apache.kafka.clients.consumer.CooperativeStickyAssignor': 'cooperative-sticky'
}

/** partition.assignment.strategy as Java reads it (comma-separated class names, blanks trimmed, an
 * empty element refused, a repeated one dropped) -> protocol names that assigners.js implements. */
const assignorNames = raw => {
  const refuse = why => new OpError('INVALID_ARGUMENT', `partition.assignment.strategy=${JSON.stringify(raw)}: ${why}`,
    { key: 'partition.assignment.strategy', value: raw })
  const text = String(raw).trim()
  const items = text ? text.split(',').map(s => s.trim()) : []
  if (!items.length) throw refuse("no assignor (Java fails subscribe with 'Must configure at least one partition assigner')")
  if (items.includes('')) throw refuse("values must not be empty (Java's ConfigException)")
  const names = []
  for (const item of items) {
    const name = JAVA_ASSIGNORS[item]
    if (!name) throw refuse(`${JSON.stringify(item)} is not one of Java's assignor classes ${Object.keys(JAVA_ASSIGNORS).sort().join(', ')}`)
    if (!ASSIGNERS.includes(name)) {
      throw refuse(`${item} (protocol "${name}"): KafkaJS rebalances eagerly only (no KIP-429) and has no sticky assigner; ` +
        'the driver implements Java\'s range and roundrobin only')
    }
    if (!names.includes(name)) names.push(name)
  }
  return names
}

const noStaticMembership = raw => {
  throw new OpError('INVALID_ARGUMENT', `group.instance.id=${JSON.stringify(raw)}: KafkaJS 2.2.4 has no static membership ` +
    '(its consumer group sends no group instance id in JoinGroup)', { key: 'group.instance.id', value: raw })
}

const COMMON = {
  'bootstrap.servers': ['client', 'brokers', raw => String(raw).split(',').map(s => s.trim()).filter(Boolean)],
  'client.id': ['client', 'clientId', String],
  'request.timeout.ms': ['client', 'requestTimeout', int('request.timeout.ms')],
  'retries': ['retry', 'retries', int('retries')],
  'retry.backoff.ms': ['retry', 'initialRetryTime', int('retry.backoff.ms')],
  'metadata.max.age.ms': ['factory', 'metadataMaxAge', int('metadata.max.age.ms')],
  'allow.auto.create.topics': ['factory', 'allowAutoTopicCreation', bool('allow.auto.create.topics')]
}

const PRODUCER = {
  ...COMMON,
  'transactional.id': ['factory', 'transactionalId', String],
  'enable.idempotence': ['factory', 'idempotent', bool('enable.idempotence')],
  'transaction.timeout.ms': ['factory', 'transactionTimeout', int('transaction.timeout.ms')],
  'max.in.flight.requests.per.connection': ['factory', 'maxInFlightRequests', int('max.in.flight.requests.per.connection')],
  'acks': ['send', 'acks', acks]
}

const CONSUMER = {
  ...COMMON,
  'group.id': ['factory', 'groupId', String],
  'session.timeout.ms': ['factory', 'sessionTimeout', int('session.timeout.ms')],
  'heartbeat.interval.ms': ['factory', 'heartbeatInterval', int('heartbeat.interval.ms')],
  // Java sends max.poll.interval.ms as JoinGroup's rebalance timeout; KafkaJS's option for it
  'max.poll.interval.ms': ['factory', 'rebalanceTimeout', int('max.poll.interval.ms')],
  'isolation.level': ['factory', 'readUncommitted', isolation],
  'fetch.max.wait.ms': ['factory', 'maxWaitTimeInMs', int('fetch.max.wait.ms')],
  'fetch.min.bytes': ['factory', 'minBytes', int('fetch.min.bytes')],
  'fetch.max.bytes': ['factory', 'maxBytes', int('fetch.max.bytes')],
  'max.partition.fetch.bytes': ['factory', 'maxBytesPerPartition', int('max.partition.fetch.bytes')],
  'auto.offset.reset': ['subscribe', 'fromBeginning', offsetReset],
  'enable.auto.commit': ['run', 'autoCommit', bool('enable.auto.commit')],
  'auto.commit.interval.ms': ['run', 'autoCommitInterval', int('auto.commit.interval.ms')],
  // unset: KafkaJS's own default, its RoundRobinAssigner (protocol "RoundRobinAssigner")
  'partition.assignment.strategy': ['subscribe', 'assignors', assignorNames],
  'group.instance.id': ['factory', 'groupInstanceId', noStaticMembership]
}

const ADMIN = { ...COMMON }

/**
 * config (Java properties) -> {client, retry, factory, run, send, subscribe} option objects.
 * Throws INVALID_ARGUMENT naming every key KafkaJS has no option for.
 */
function mapConfig (config, table) {
  const out = { client: {}, retry: {}, factory: {}, run: {}, send: {}, subscribe: {} }
  const unknown = Object.keys(config || {}).filter(key => !table[key]).sort()
  if (unknown.length) {
    throw new OpError('INVALID_ARGUMENT', `KafkaJS has no option for ${unknown.join(', ')}`, { keys: unknown })
  }
  for (const [key, raw] of Object.entries(config || {})) {
    const [where, option, convert] = table[key]
    out[where][option] = convert(raw)
  }
  if (Object.keys(out.retry).length) out.client.retry = out.retry
  return out
}

module.exports = { mapConfig, PRODUCER, CONSUMER, ADMIN, JAVA_ASSIGNORS }
