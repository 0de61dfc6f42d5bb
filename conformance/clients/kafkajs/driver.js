'use strict'
/**
 * kconform's driver for KafkaJS 2.2.4 (pure JavaScript): `node driver.js --errors KAFKA_ERRORS_JSON`.
 *
 * KafkaJS's own classification of an error is its `retriable` flag (KafkaJSError and subclasses;
 * KafkaJSProtocolError takes it from KafkaJS's own table of Kafka codes). It has no notion of an
 * abortable or a fatal error and none of fencing, so `abortable`, `fatal` and `fenced` are always
 * false, and the reply carries what KafkaJS does expose instead: `retriable` of the error the
 * application sees, `cause_retriable` of the innermost cause (KafkaJSNumberOfRetriesExceeded and
 * KafkaJSNonRetriableError wrap one), and `txn_active` -- the current KafkaJS transaction's
 * isActive() after the failure. KafkaJS's transaction state machine (UNINITIALIZED, READY,
 * TRANSACTING, COMMITTING, ABORTING) is not public; it shows in the messages of its
 * "Transaction state exception" errors. There is no settled-state race: KafkaJS moves that state
 * machine in the same promise chain that rejects the call (a failed EndTxn leaves it in
 * COMMITTING or ABORTING before the rejection reaches the driver), and no sender thread runs
 * behind it.
 *
 * Names: KafkaJS still spells some Kafka errors the old way (NOT_LEADER_FOR_PARTITION,
 * NOT_COORDINATOR_FOR_GROUP) and knows codes only up to 88: PRODUCER_FENCED (90) and later codes
 * arrive as KAFKAJS_UNKNOWN_ERROR_CODE ("Unknown error code 90"). The name is always Kafka's for
 * the code (the table conformance/clients/errors.py writes), taken from the innermost error that
 * carries one; `client_class` keeps KafkaJS's class name and `client_type` its type string.
 *
 * How KafkaJS maps to the ops:
 * - init_transactions: KafkaJS initialises the producer id in its first producer.transaction()
 *   (and never again). The driver calls transaction() and aborts the empty transaction it opened
 *   (KafkaJS sends no EndTxn for it), leaving KafkaJS in READY with its id. A second
 *   init_transactions therefore sends nothing and succeeds, as KafkaJS does not re-initialise.
 * - begin_transaction is producer.transaction(); send, send_offsets_to_transaction,
 *   commit_transaction and abort_transaction go to that transaction object. sendOffsets takes
 *   {consumerGroupId, topics}: no consumer group metadata (no KIP-447), so TxnOffsetCommit carries
 *   the group id only -- the consumer's group.id, or group_id without a consumer.
 * - The producer connects (KafkaJS's connect()) on its first op that needs a broker. KafkaJS's
 *   `idempotent` is false unless the config sets enable.idempotence (KafkaJS's own default; its
 *   transactions do not need it): with it, connect() also fetches a non-transactional producer id
 *   from the broker Metadata names controller, for the producer's plain sends -- an extra
 *   InitProducerId that fails when that broker is down (measured: cluster/txn_log_under_min_isr,
 *   "Closed connection" before the transactional InitProducerId was sent).
 * - Send order: KafkaJS has no send queue -- a send() is a whole Produce request -- and concurrent
 *   send() calls to one partition do not reach the log in call order (measured on Apache Kafka
 *   4.3: eos/copy_commit's copier, sending without waiting, wrote r1 before r0: each send awaits
 *   metadata before it takes the per-broker lock that assigns sequence numbers). A send with
 *   wait: false therefore starts when the previous send settled, the order a KafkaJS application
 *   gets by awaiting each send, and flush waits for the last one.
 * - Headers: KafkaJS takes them as an object (name -> value or array of values), so a header list
 *   whose repeated names are not adjacent cannot keep its order: INVALID_ARGUMENT.
 * - Consumers: KafkaJS consumes only as a member of a consumer group, through consumer.run() with
 *   an eachBatch callback. The driver buffers the batches KafkaJS hands it and `poll` takes
 *   records from that buffer (resolving each record's offset in KafkaJS as it is taken, so the
 *   next fetch resumes after the last record polled; a batch's callback returns once all of it was
 *   polled). KafkaJS rebalances in the background and every rejoin (joinAndSync) starts a new
 *   offset manager, so the next fetch resumes at the group's committed offset, not after the
 *   records resolved: a record the driver took before is read again, by this member or by the
 *   partition's new owner. So each buffered batch carries the generation it was fetched in (an
 *   epoch: a rebalance signal -- KafkaJS's REBALANCING event, a heartbeat in eachBatch failing
 *   with a rejoin error -- and GROUP_JOIN end one); `poll` takes no record from a batch of an
 *   ended epoch (nor resolves one: its resolveOffset would move the new generation's offsets) and
 *   drops the records it took from one, so one `poll` returns records of one generation, as one
 *   KafkaConsumer.poll() does. `subscribe` joins the consumer's group.id, with KafkaJS's own RoundRobinAssigner
 *   (protocol "RoundRobinAssigner") unless partition.assignment.strategy names Java's range or
 *   roundrobin, which assigners.js implements as Java computes them, under Java's protocol names,
 *   so that KafkaJS can share a group with the other clients. KafkaJS has no manual assignment, so
 *   `assign` joins a group of the driver's own (kconform-assign-<pid>-<n>, the consumer alone in
 *   it) with a partition assigner that gives this member exactly the partitions asked for, and
 *   seeks each to its start: the offset given, else the committed offset of the consumer's
 *   group.id, else auto.offset.reset -- what Java's assign() does. Commits in that mode go to the
 *   consumer's group.id with generation -1 and no member id, as Java's do, through the group
 *   coordinator's Broker.offsetCommit (KafkaJS hands its cluster to partition assigners; Cluster and
 *   Broker are in its typed API), and enable.auto.commit commits the polled positions from `poll`
 *   every auto.commit.interval.ms (KafkaJS's own auto-commit belongs to its group membership).
 *   `position` is the next offset poll will hand out, as KafkaJS resolves it (past control records
 *   and aborted batches, from KafkaJS's end-of-batch events). `committed` is admin.fetchOffsets.
 * - list_offsets asks the cluster of a KafkaJS consumer of the requested isolation level that
 *   never joins (Cluster.fetchTopicsOffset): KafkaJS's admin asks at one isolation level only.
 * - create_topics: admin.createTopics per topic; KafkaJS resolves false for a topic that exists.
 * - describe_transactions, describe_producers: KafkaJS has neither API (UNSUPPORTED_BY_CLIENT; the
 *   runner then sends the request itself).
 */

const { Kafka, logLevel, Partitioners, AssignerProtocol } = require('kafkajs')
const { javaAssigner } = require('./assigners')
const KAFKAJS_VERSION = require('kafkajs/package.json').version
const { PROTOCOL_VERSION, OpError, Deadline, loadErrorTable, decodeBytes, encodeBytes, serve, sleep } = require('./protocol')
const { mapConfig, PRODUCER, CONSUMER, ADMIN } = require('./config')

const ERRORS = loadErrorTable(process.argv)

const OPS = ['hello', 'create_producer', 'create_consumer', 'create_admin', 'init_transactions', 'begin_transaction',
  'send', 'flush', 'send_offsets_to_transaction', 'commit_transaction', 'abort_transaction', 'subscribe', 'assign',
  'poll', 'commit', 'committed', 'position', 'close', 'list_offsets', 'create_topics']
const UNSUPPORTED = {
  describe_transactions: `KafkaJS ${KAFKAJS_VERSION} has no DescribeTransactions`,
  describe_producers: `KafkaJS ${KAFKAJS_VERSION} has no DescribeProducers`,
  fence_producers: `KafkaJS ${KAFKAJS_VERSION} has no admin fencing of transactional ids (KIP-618)`,
  eos_loop: `KafkaJS ${KAFKAJS_VERSION} has no consume-transform-produce loop of its own`
}

// KafkaJS errors that carry no Kafka code -> normalised name (innermost first, then outward).
const LOCAL_CLASS_NAMES = {
  KafkaJSRequestTimeoutError: 'REQUEST_TIMED_OUT',
  KafkaJSTimeout: 'REQUEST_TIMED_OUT',
  KafkaJSLockTimeout: 'REQUEST_TIMED_OUT',
  KafkaJSConnectionError: 'NETWORK_EXCEPTION',
  KafkaJSConnectionClosedError: 'NETWORK_EXCEPTION',
  KafkaJSServerDoesNotSupportApiKey: 'UNSUPPORTED_VERSION'
}
// KafkaJS refuses a call in the wrong state with a plain KafkaJSError/KafkaJSNonRetriableError;
// only the message tells which.
const STATE_MESSAGES = [/^Transaction state exception/, /already an ongoing transaction/,
  /Cannot continue to use transaction once ended/, /Method unavailable if non-transactional/,
  /Must provide transactional id/, /producer is disconnect/, /consumer#run must be called first/,
  /Cannot subscribe to topic while consumer is running/]
const ARGUMENT_MESSAGES = [/^Invalid /, /^Missing /, /must be a non-empty string/, /Offset must not be/,
  /Not requiring ack for all messages/, /^Cannot manage transactions without a transactionalId/]

const MAX_CAUSES = 10
// How long assign waits for KafkaJS to join its group (the embedded broker and Kafka's default
// group.initial.rebalance.delay.ms is 3 s).
const ASSIGN_JOIN_WAIT_MS = 8000
// Batches of different partitions KafkaJS may hand over at once (its partitionsConsumedConcurrently).
const BATCHES_AT_ONCE = 16
// The errors after which KafkaJS's runner rejoins the group (its isRebalancing, and UNKNOWN_MEMBER_ID).
const REJOIN_TYPES = new Set(['REBALANCE_IN_PROGRESS', 'NOT_COORDINATOR_FOR_GROUP', 'ILLEGAL_GENERATION', 'UNKNOWN_MEMBER_ID'])

function causes (err) {
  const out = []
  let e = err
  while (e && out.length < MAX_CAUSES) {
    out.push(e)
    e = e.cause && e.cause !== e ? e.cause : null
  }
  return out
}

/** Kafka's name for a KafkaJS error that carries a Kafka code, else null. */
function kafkaName (e) {
  if (!e || typeof e.code !== 'number' || !('type' in e)) return null
  if (e.type === 'KAFKAJS_UNKNOWN_ERROR_CODE') {
    const m = /Unknown error code (-?\d+)/.exec(e.message || '')
    return m ? ERRORS.name(Number(m[1])) : null
  }
  return ERRORS.name(e.code)
}

function fromKafkaJS (e) {
  return Boolean(e && e.stack && /node_modules[\\/]kafkajs[\\/]/.test(e.stack))
}

function localName (chain) {
  for (const e of chain.slice().reverse()) {
    if (LOCAL_CLASS_NAMES[e.name]) return LOCAL_CLASS_NAMES[e.name]
  }
  for (const e of chain) {
    const msg = String(e.message || '')
    if (STATE_MESSAGES.some(re => re.test(msg))) return 'ILLEGAL_STATE'
    if (ARGUMENT_MESSAGES.some(re => re.test(msg))) return 'INVALID_ARGUMENT'
  }
  const inner = chain[chain.length - 1]
  if (inner.code === 'ERR_ASSERTION' || inner instanceof TypeError || inner instanceof RangeError) return 'INVALID_ARGUMENT'
  return 'CLIENT_ERROR'
}

const deferred = () => {
  let resolve
  const promise = new Promise(r => { resolve = r })
  return { promise, resolve }
}

const tpKey = (topic, partition) => `${topic}\u0000${partition}`

// The run's security settings (conformance/security.py), from the environment: every Kafka client
// of the driver authenticates with them (KafkaJS's sasl option: scram-sha-256 / scram-sha-512) and,
// over SASL_SSL, trusts the run's CA only (its ssl option: Node's tls.connect, host names verified).
const SECURITY = process.env.KCONFORM_CLIENT_SECURITY ? JSON.parse(process.env.KCONFORM_CLIENT_SECURITY) : null

function securityOptions () {
  if (!SECURITY) return {}
  if (!['SASL_PLAINTEXT', 'SASL_SSL', 'SSL'].includes(SECURITY.protocol)) {
    throw new Error(`security protocol ${SECURITY.protocol} is not supported by this driver`)
  }
  const tls = SECURITY.protocol !== 'SASL_PLAINTEXT'
  // Node's default CAs when the settings name none
  const ssl = tls ? (SECURITY.ca_file ? { ca: [require('fs').readFileSync(SECURITY.ca_file)] } : true) : false
  if (SECURITY.protocol === 'SSL') return { ssl }
  return { ssl, sasl: { mechanism: SECURITY.mechanism.toLowerCase(), username: SECURITY.username, password: SECURITY.password } }
}

class KafkaJSDriver {
  constructor () {
    this.producer = null // {kafka, producer, send options, connected, transactional}
    this.txn = null // the current KafkaJS transaction
    this.consumer = null // see createConsumer
    this.admin = null // {kafka, admin, connected}
    this.bootstrap = null
    this.deliveries = { next: 0, pending: new Map(), done: [] }
    this.assignGroups = 0
    this.offsetReaders = {} // isolation level -> {kafka consumer, cluster}
  }

  // -- dispatch ----------------------------------------------------------------------------------
  async handle (op, args, deadline) {
    if (UNSUPPORTED[op]) throw new OpError('UNSUPPORTED_BY_CLIENT', `${op}: ${UNSUPPORTED[op]}`)
    if (!OPS.includes(op)) {
      const known = [...Object.keys(UNSUPPORTED), ...OPS]
      if (known.includes(op)) throw new OpError('UNSUPPORTED_BY_CLIENT', `${op}: kafkajs has no such operation`)
      throw new OpError('DRIVER_ERROR', `unknown op ${JSON.stringify(op)}`)
    }
    const method = 'op_' + op
    return this[method](args, deadline)
  }

  normalise (err, op) {
    const chain = causes(err)
    let name = null
    let coded = null
    for (const e of chain.slice().reverse()) {
      name = kafkaName(e)
      if (name) { coded = e; break }
    }
    const inner = chain[chain.length - 1]
    if (!name) {
      if (!chain.some(fromKafkaJS)) {
        return new OpError('DRIVER_ERROR', `${err && err.name}: ${err && err.message}`, { traceback: String(err && err.stack) }).info
      }
      name = localName(chain)
    }
    const info = {
      name,
      code: ERRORS.code(name),
      retriable: err.retriable === true,
      abortable: false,
      fatal: false,
      fenced: false,
      message: String(err.message || err),
      client_class: err.name || 'Error',
      origin: 'client',
      cause_retriable: inner.retriable === true
    }
    if (inner !== err) info.cause_class = inner.name
    if (coded && coded.type) info.client_type = coded.type
    if (this.txn && ['init_transactions', 'begin_transaction', 'send', 'flush', 'send_offsets_to_transaction',
      'commit_transaction', 'abort_transaction'].includes(op)) info.txn_active = this.txn.isActive()
    return info
  }

  // -- lifecycle ---------------------------------------------------------------------------------
  kafka (options, label) {
    if (!options.brokers || !options.brokers.length) throw new OpError('INVALID_ARGUMENT', `${label}: config needs bootstrap.servers`)
    return new Kafka({
      ...securityOptions(),
      ...options,
      logLevel: logLevel.INFO,
      logCreator: () => ({ namespace, level, log }) => {
        const { message, ...extra } = log
        process.stderr.write(`kafkajs ${level} ${namespace}: ${message} ${JSON.stringify(extra)}\n`)
      }
    })
  }

  op_hello () {
    return {
      client: 'kafkajs',
      library: 'kafkajs',
      library_version: KAFKAJS_VERSION,
      client_version: KAFKAJS_VERSION,
      language: 'javascript',
      protocol: PROTOCOL_VERSION,
      pid: process.pid,
      ops: OPS
    }
  }

  op_create_producer (args) {
    if (this.producer) throw new OpError('ILLEGAL_STATE', 'this driver already has a producer; start another driver')
    const cfg = mapConfig(args.config, PRODUCER)
    const factory = { ...cfg.factory }
    const kafka = this.kafka(cfg.client, 'create_producer')
    const producer = kafka.producer({ ...factory, createPartitioner: Partitioners.DefaultPartitioner })
    this.bootstrap = cfg.client.brokers
    const send = { ...cfg.send }
    if (cfg.client.requestTimeout !== undefined) send.timeout = cfg.client.requestTimeout // Java's Produce timeout
    this.producer = { kafka, producer, send, connected: false, transactional: Boolean(factory.transactionalId), lastSend: Promise.resolve() }
    return { client_id: cfg.client.clientId || null }
  }

  async connectedProducer () {
    if (!this.producer) throw new OpError('ILLEGAL_STATE', 'no producer: call create_producer first')
    if (!this.producer.connected) {
      await this.producer.producer.connect()
      this.producer.connected = true
    }
    return this.producer.producer
  }

  op_create_consumer (args) {
    if (this.consumer) throw new OpError('ILLEGAL_STATE', 'this driver already has a consumer; start another driver')
    const cfg = mapConfig(args.config, CONSUMER)
    const kafka = this.kafka(cfg.client, 'create_consumer')
    this.bootstrap = cfg.client.brokers
    this.consumer = {
      kafka,
      factory: cfg.factory,
      run: cfg.run,
      fromBeginning: cfg.subscribe.fromBeginning === true,
      assignors: cfg.subscribe.assignors || null, // Java protocol names (assigners.js); null: KafkaJS's default
      groupId: cfg.factory.groupId || null,
      mode: null, // 'subscribe' | 'assign'
      kc: null, // the KafkaJS consumer
      cluster: null, // its cluster (from the partition assigner)
      assigned: [], // [{topic, partition}]
      positions: new Map(), // tpKey -> next offset
      buffer: [], // batches handed over by eachBatch, oldest first
      epoch: 0, // the group generation the driver takes records of (see the module docstring)
      rejoining: false, // between a rebalance signal and the GROUP_JOIN that ends it
      arrived: deferred(),
      errors: [],
      joined: deferred(),
      starting: null,
      lastAutoCommit: Date.now()
    }
    return { client_id: cfg.client.clientId || null }
  }

  op_create_admin (args) {
    const cfg = mapConfig(args.config || {}, ADMIN)
    if (!cfg.client.brokers) {
      if (!this.bootstrap) throw new OpError('ILLEGAL_STATE', 'create_admin needs config with bootstrap.servers')
      cfg.client.brokers = this.bootstrap
    }
    const kafka = this.kafka(cfg.client, 'create_admin')
    this.admin = { kafka, admin: kafka.admin(), connected: false }
    return {}
  }

  async connectedAdmin () {
    if (!this.admin) this.op_create_admin({})
    if (!this.admin.connected) {
      await this.admin.admin.connect()
      this.admin.connected = true
    }
    return this.admin.admin
  }

  async op_close (args) {
    const which = args.which || 'all'
    const closed = []
    if ((which === 'producer' || which === 'all') && this.producer) {
      if (this.producer.connected) await this.producer.producer.disconnect()
      this.producer = null
      this.txn = null
      closed.push('producer')
    }
    if ((which === 'consumer' || which === 'all') && this.consumer) {
      const c = this.consumer
      this.consumer = null
      for (const b of c.buffer) b.done.resolve()
      if (c.kc) {
        const disconnected = c.kc.disconnect()
        // KafkaJS's disconnect first waits for its in-flight fetch, a long poll of up to
        // maxWaitTimeInMs (5 s by default). A consumer in a subscription leaves its group after it,
        // so close waits; the driver's own group of an assignment matters to nobody, so close
        // answers at once and KafkaJS finishes in the background (as Java's assign-mode close
        // has no group to leave).
        if (c.mode === 'assign') disconnected.catch(err => process.stderr.write(`disconnect: ${err}\n`))
        else await disconnected
      }
      if (c.admin) await c.admin.disconnect()
      for (const reader of Object.values(this.offsetReaders)) await reader.cluster.disconnect()
      this.offsetReaders = {}
      closed.push('consumer')
    }
    if ((which === 'admin' || which === 'all') && this.admin) {
      if (this.admin.connected) await this.admin.admin.disconnect()
      this.admin = null
      closed.push('admin')
    }
    return { closed }
  }

  // -- transactions ------------------------------------------------------------------------------
  async op_init_transactions () {
    const producer = await this.connectedProducer()
    const txn = await producer.transaction() // InitProducerId the first time, then begins locally
    await txn.abort() // nothing was added: KafkaJS sends no EndTxn and returns to READY
    return {}
  }

  async op_begin_transaction () {
    const producer = await this.connectedProducer()
    this.txn = await producer.transaction()
    return {}
  }

  currentTxn (op) {
    if (!this.producer) throw new OpError('ILLEGAL_STATE', 'no producer: call create_producer first')
    if (!this.txn) throw new OpError('ILLEGAL_STATE', `${op}: no KafkaJS transaction: call begin_transaction first`)
    return this.txn
  }

  async op_commit_transaction () {
    await this.connectedProducer()
    await this.currentTxn('commit_transaction').commit()
    return {}
  }

  async op_abort_transaction () {
    await this.connectedProducer()
    await this.currentTxn('abort_transaction').abort()
    return {}
  }

  async op_send_offsets_to_transaction (args) {
    await this.connectedProducer()
    const txn = this.currentTxn('send_offsets_to_transaction')
    const groupId = this.consumer ? this.consumer.groupId : args.group_id
    if (!groupId) throw new OpError('ILLEGAL_STATE', 'send_offsets_to_transaction needs a consumer with a group.id or a group_id')
    await txn.sendOffsets({ consumerGroupId: groupId, topics: byTopic(args.offsets) })
    return { group_id: groupId }
  }

  // -- produce -----------------------------------------------------------------------------------
  message (args) {
    const message = {
      key: decodeBytes(args.key),
      value: decodeBytes(args.value),
      timestamp: String(args.timestamp_ms !== undefined && args.timestamp_ms !== null ? args.timestamp_ms : Date.now())
    }
    if (args.partition !== undefined && args.partition !== null) message.partition = Number(args.partition)
    if (args.headers !== undefined && args.headers !== null) message.headers = headerObject(args.headers)
    return message
  }

  async op_send (args) {
    const message = this.message(args) // payload errors before anything else, as in every driver
    const producer = await this.connectedProducer()
    const target = this.producer.transactional && this.txn ? this.txn : producer
    // each send starts when the previous one settled: see "send order" in the module docstring
    const sent = this.producer.lastSend.then(() => target.send({ ...this.producer.send, topic: args.topic, messages: [message] }))
    this.producer.lastSend = sent.catch(() => {})
    const result = meta => ({
      topic: meta.topicName,
      partition: meta.partition,
      offset: Number(meta.baseOffset),
      timestamp_ms: meta.logAppendTime && meta.logAppendTime !== '-1' ? Number(meta.logAppendTime) : Number(message.timestamp)
    })
    if (args.wait === false) {
      const d = this.deliveries
      const seq = ++d.next
      const settle = sent.then(
        ([meta]) => d.done.push({ seq, ...result(meta) }),
        err => d.done.push({ seq, topic: args.topic, partition: message.partition === undefined ? null : message.partition, error: this.normalise(err, 'send') })
      ).finally(() => d.pending.delete(seq))
      d.pending.set(seq, settle)
      return { queued: true, seq }
    }
    const [meta] = await sent
    return result(meta)
  }

  async op_flush (args, deadline) {
    const d = this.deliveries
    if (d.pending.size) {
      await Promise.race([Promise.allSettled([...d.pending.values()]), sleep(deadline.remainingMs() - 50)])
    }
    const deliveries = d.done.sort((a, b) => a.seq - b.seq)
    d.done = []
    if (d.pending.size) {
      throw new OpError('DEADLINE_EXCEEDED', `${d.pending.size} records undelivered at the deadline`, { deliveries, pending: d.pending.size })
    }
    return { deliveries }
  }

  // -- consume -----------------------------------------------------------------------------------
  theConsumer () {
    if (!this.consumer) throw new OpError('ILLEGAL_STATE', 'no consumer: call create_consumer first')
    return this.consumer
  }

  async op_subscribe (args) {
    const c = this.unstartedConsumer()
    c.mode = 'subscribe'
    const assigners = c.assignors ? { partitionAssigners: c.assignors.map(name => javaAssigner(name, cluster => { c.cluster = cluster })) } : {}
    c.kc = this.kafkaConsumer(c, { ...c.factory, ...assigners })
    c.kc.on(c.kc.events.GROUP_JOIN, ({ payload }) => {
      c.assigned = Object.entries(payload.memberAssignment).flatMap(([topic, ps]) => ps.map(partition => ({ topic, partition })))
    })
    this.start(c, args.topics.map(String), { autoCommit: c.run.autoCommit, autoCommitInterval: c.run.autoCommitInterval }, async () => new Map())
    return {} // like Java's subscribe: the group is joined in the background, poll gets the records
  }

  async op_assign (args, deadline) {
    const c = this.unstartedConsumer()
    const wanted = {}
    for (const p of args.partitions) (wanted[p.topic] = wanted[p.topic] || []).push(Number(p.partition))
    c.mode = 'assign'
    c.assigned = args.partitions.map(p => ({ topic: p.topic, partition: Number(p.partition) }))
    const group = `kconform-assign-${process.pid}-${++this.assignGroups}`
    c.kc = this.kafkaConsumer(c, { ...c.factory, groupId: group, partitionAssigners: [fixedAssigner(wanted, c)] })
    this.start(c, Object.keys(wanted), { autoCommit: false }, () => this.startOffsets(c, args.partitions))
    // Like Java's assign() this never fails for want of a broker (what goes wrong shows in poll's
    // errors), but it returns once KafkaJS owns the partitions -- a new group's first join may
    // wait group.initial.rebalance.delay.ms -- so that poll starts from a consuming consumer.
    await Promise.race([c.joined.promise, sleep(Math.min(ASSIGN_JOIN_WAIT_MS, deadline.remainingMs() - 100))])
    return {}
  }

  unstartedConsumer () {
    const c = this.theConsumer()
    if (c.mode) throw new OpError('ILLEGAL_STATE', `the consumer already ${c.mode === 'assign' ? 'has an assignment' : 'subscribed'}; KafkaJS cannot change it while running`)
    return c
  }

  /** Connect, subscribe and run the KafkaJS consumer in the background, starting each partition
   * at the offset `starts()` resolves (tpKey -> offset): the seeks are made right after
   * consumer.run() set up KafkaJS's consumer group and before its first fetch. */
  start (c, topics, runOptions, starts) {
    c.kc.on(c.kc.events.GROUP_JOIN, () => c.joined.resolve())
    c.starting = (async () => {
      await c.kc.connect()
      await c.kc.subscribe({ topics, fromBeginning: c.fromBeginning })
      const seeks = await starts()
      const running = this.run(c, runOptions) // KafkaJS's consumer group exists once run() was called
      for (const [key, offset] of seeks) {
        const [topic, partition] = key.split('\u0000')
        c.positions.set(key, offset)
        c.kc.seek({ topic, partition: Number(partition), offset: String(offset) })
      }
      await running
    })()
    c.starting.catch(err => c.errors.push(this.normalise(err, 'poll')))
  }

  /** The consumer once its start-up has run (positions known); a start-up failure is this op's. */
  async startedConsumer (op) {
    const c = this.theConsumer()
    if (!c.mode) throw new OpError('ILLEGAL_STATE', `${op}: the consumer has neither a subscription nor an assignment`)
    await c.starting
    return c
  }

  /** tpKey -> the offset consumption starts at: given, else the group's committed offset, else reset. */
  async startOffsets (c, partitions) {
    const starts = new Map()
    const open = partitions.filter(p => p.offset === undefined || p.offset === null)
    for (const p of partitions) if (!open.includes(p)) starts.set(tpKey(p.topic, Number(p.partition)), Number(p.offset))
    if (!open.length) return starts
    const committed = c.groupId ? await this.committedOffsets(c, c.groupId, open) : new Map()
    const reset = new Map()
    for (const topic of new Set(open.filter(p => !committed.has(tpKey(p.topic, Number(p.partition)))).map(p => p.topic))) {
      const admin = await this.consumerAdmin(c)
      for (const row of await admin.fetchTopicOffsets(topic)) {
        reset.set(tpKey(topic, row.partition), Number(c.fromBeginning ? row.low : row.high))
      }
    }
    for (const p of open) {
      const key = tpKey(p.topic, Number(p.partition))
      starts.set(key, committed.has(key) ? committed.get(key) : reset.get(key))
    }
    return starts
  }

  async consumerAdmin (c) {
    if (!c.admin) {
      c.admin = c.kafka.admin()
      await c.admin.connect()
    }
    return c.admin
  }

  /** The group's committed offsets (tpKey -> offset; none: absent), by admin.fetchOffsets. */
  async committedOffsets (c, groupId, partitions) {
    const admin = await this.consumerAdmin(c)
    const topics = [...new Set(partitions.map(p => p.topic))]
    const out = new Map()
    for (const row of await admin.fetchOffsets({ groupId, topics })) {
      for (const p of row.partitions) if (Number(p.offset) >= 0) out.set(tpKey(row.topic, p.partition), Number(p.offset))
    }
    return out
  }

  kafkaConsumer (c, options) {
    const kc = c.kafka.consumer({ partitionAssigners: [captureCluster(c)], ...options })
    kc.on(kc.events.REBALANCING, () => this.endEpoch(c, true))
    kc.on(kc.events.GROUP_JOIN, () => this.endEpoch(c, false))
    kc.on(kc.events.END_BATCH_PROCESS, ({ payload }) => {
      if (payload.batchSize === 0) this.advance(c, payload.topic, payload.partition, Number(payload.lastOffset) + 1)
    })
    kc.on(kc.events.CRASH, ({ payload }) => {
      c.errors.push({ ...this.normalise(payload.error, 'poll'), restart: payload.restart })
    })
    return kc
  }

  /** The generation the buffered batches were fetched in has ended (a rebalance signal, or the
   * GROUP_JOIN of a new one: `rejoining` says which). The next one starts a new offset manager:
   * each partition starts again at the committed offset, so the positions of the records poll took
   * go (position answers from the committed offset, startOffsets). */
  endEpoch (c, rejoining) {
    c.epoch++
    c.rejoining = rejoining
    if (c.mode === 'subscribe') c.positions.clear()
  }

  advance (c, topic, partition, next) {
    const key = tpKey(topic, partition)
    if (!(c.positions.get(key) >= next)) c.positions.set(key, next)
  }

  run (c, runOptions) {
    return c.kc.run({
      ...runOptions,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: BATCHES_AT_ONCE,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
        if (!batch.messages.length) return
        // a batch handed over while the group rejoins is of the ended generation (epoch -1: never taken)
        const entry = { topic: batch.topic, partition: batch.partition, records: batch.messages, taken: 0, lastOffset: Number(batch.lastOffset()), resolveOffset, isStale, epoch: c.rejoining ? -1 : c.epoch, done: deferred() }
        c.buffer.push(entry)
        c.arrived.resolve()
        try {
          while (entry.taken < entry.records.length && isRunning() && !isStale() && this.consumer === c && entry.epoch === c.epoch) {
            const polled = await Promise.race([entry.done.promise.then(() => true), sleep(1000).then(() => false)])
            if (!polled) {
              try {
                await heartbeat()
              } catch (err) {
                // KafkaJS rejoins after this error (the runner's REBALANCING follows once every batch returned)
                if (causes(err).some(e => REJOIN_TYPES.has(e.type))) this.endEpoch(c, true)
                throw err
              }
            }
          }
        } finally {
          c.buffer = c.buffer.filter(b => b !== entry)
        }
      }
    })
  }

  /** Whether poll may take records of this buffered batch: of the running generation, no seek pending. */
  takable (c, entry) {
    return entry.epoch === c.epoch && !entry.isStale()
  }

  async op_poll (args, deadline) {
    const c = this.theConsumer()
    if (!c.mode) throw new OpError('ILLEGAL_STATE', 'poll: the consumer has neither a subscription nor an assignment')
    const max = Number(args.max_records === undefined ? 500 : args.max_records)
    const end = Date.now() + Math.min(Number(args.timeout_ms === undefined ? 1000 : args.timeout_ms), deadline.remainingMs())
    // [record row, the epoch of its batch]: a row whose epoch ended is dropped (module docstring) --
    // unless KafkaJS auto-commits (its default): it commits the offsets resolved, these rows' too, as
    // it rejoins and every autoCommitInterval, so the next generation starts after them and dropping
    // them would lose them (driver.py BaseDriver.note_revoked)
    const autoCommits = c.mode === 'subscribe' && c.run.autoCommit !== false
    const current = ([, epoch]) => autoCommits || epoch === c.epoch
    let taken = []
    while (taken.length < max && Date.now() < end) {
      for (const entry of c.buffer) {
        if (!this.takable(c, entry)) continue
        while (entry.taken < entry.records.length && taken.length < max) {
          const m = entry.records[entry.taken++]
          taken.push([recordRow(entry.topic, entry.partition, m), entry.epoch])
          entry.resolveOffset(m.offset)
          this.advance(c, entry.topic, entry.partition, Number(m.offset) + 1)
        }
        if (entry.taken === entry.records.length && !entry.finished) {
          entry.finished = true
          entry.resolveOffset(String(entry.lastOffset)) // past trailing control records
          this.advance(c, entry.topic, entry.partition, entry.lastOffset + 1)
          entry.done.resolve()
        }
        if (taken.length >= max) break
      }
      if (taken.length >= max) break
      c.arrived = deferred()
      await Promise.race([c.arrived.promise, sleep(Math.min(200, end - Date.now()))])
      taken = taken.filter(current)
    }
    const records = taken.filter(current).map(([row]) => row)
    if (c.mode === 'assign' && c.run.autoCommit && Date.now() - c.lastAutoCommit >= (c.run.autoCommitInterval || 5000)) {
      c.lastAutoCommit = Date.now()
      await this.commitAssigned(c, this.positionRows(c))
    }
    const data = { records }
    if (c.errors.length) {
      data.errors = c.errors
      c.errors = []
    }
    return data
  }

  positionRows (c) {
    return c.assigned.filter(p => c.positions.has(tpKey(p.topic, p.partition)))
      .map(p => ({ ...p, offset: c.positions.get(tpKey(p.topic, p.partition)) }))
  }

  async commitAssigned (c, offsets) {
    if (!c.groupId) throw new OpError('ILLEGAL_STATE', 'commit: the consumer has no group.id')
    if (!c.cluster) throw new OpError('DRIVER_ERROR', 'commit: KafkaJS has not handed its cluster to the partition assigner')
    const coordinator = await c.cluster.findGroupCoordinator({ groupId: c.groupId })
    await coordinator.offsetCommit({ groupId: c.groupId, groupGenerationId: -1, memberId: '', retentionTime: -1, topics: byTopic(offsets) })
  }

  async op_commit (args) {
    const c = await this.startedConsumer('commit')
    const offsets = args.offsets && args.offsets.length ? args.offsets : this.positionRows(c)
    if (c.mode === 'assign') {
      await this.commitAssigned(c, offsets)
    } else {
      await c.kc.commitOffsets(offsets.map(o => ({ topic: o.topic, partition: Number(o.partition), offset: String(o.offset), ...(o.metadata !== undefined ? { metadata: o.metadata } : {}) })))
    }
    return {}
  }

  async op_committed (args) {
    const c = this.theConsumer()
    if (!c.groupId) throw new OpError('ILLEGAL_STATE', 'committed: the consumer has no group.id')
    const admin = await this.consumerAdmin(c)
    const topics = [...new Set(args.partitions.map(p => p.topic))]
    const found = new Map()
    for (const row of await admin.fetchOffsets({ groupId: c.groupId, topics })) {
      for (const p of row.partitions) found.set(tpKey(row.topic, p.partition), p)
    }
    return {
      offsets: args.partitions.map(p => {
        const f = found.get(tpKey(p.topic, Number(p.partition)))
        const offset = f && Number(f.offset) >= 0 ? Number(f.offset) : null
        return { topic: p.topic, partition: Number(p.partition), offset, metadata: f && offset !== null ? (f.metadata === undefined ? null : f.metadata) : null }
      })
    }
  }

  async op_position (args) {
    const c = await this.startedConsumer('position')
    const parts = args.partitions && args.partitions.length
      ? args.partitions.map(p => ({ topic: p.topic, partition: Number(p.partition) }))
      : c.assigned
    const unknown = parts.filter(p => !c.positions.has(tpKey(p.topic, p.partition)))
    if (unknown.length) {
      // not consumed from yet: where KafkaJS will start (the group's committed offset, else the reset)
      for (const [key, offset] of await this.startOffsets(c, unknown)) c.positions.set(key, offset)
    }
    return { positions: parts.map(p => ({ ...p, offset: c.positions.get(tpKey(p.topic, p.partition)) })) }
  }

  // -- admin -------------------------------------------------------------------------------------
  anyKafka () {
    const holder = this.admin || this.consumer || this.producer
    if (!holder) {
      this.op_create_admin({})
      return this.admin.kafka
    }
    return holder.kafka
  }

  async offsetReader (level) {
    if (!this.offsetReaders[level]) {
      const holder = {}
      const kc = this.anyKafka().consumer({ groupId: `kconform-list-offsets-${process.pid}`, readUncommitted: level === 'read_uncommitted', partitionAssigners: [captureCluster(holder)] })
      this.offsetReaders[level] = { kc, cluster: holder.cluster }
      await holder.cluster.connect()
    }
    return this.offsetReaders[level].cluster
  }

  async op_list_offsets (args) {
    const level = args.isolation_level === 'read_committed' ? 'read_committed' : 'read_uncommitted'
    const spec = args.spec || 'latest'
    if (!['earliest', 'latest', 'timestamp'].includes(spec)) throw new OpError('INVALID_ARGUMENT', `spec must be earliest|latest|timestamp, not ${JSON.stringify(spec)}`)
    const cluster = await this.offsetReader(level)
    const topics = [...new Set(args.partitions.map(p => p.topic))]
    await cluster.addMultipleTargetTopics(topics)
    await cluster.refreshMetadataIfNecessary()
    const how = spec === 'timestamp' ? { fromTimestamp: Number(args.timestamp_ms) } : { fromBeginning: spec === 'earliest' }
    const rows = await cluster.fetchTopicsOffset(topics.map(topic => ({
      topic,
      ...how,
      partitions: args.partitions.filter(p => p.topic === topic).map(p => ({ partition: Number(p.partition) }))
    })))
    const out = rows.flatMap(({ topic, partitions }) => partitions.map(p => ({ topic, partition: p.partition, offset: Number(p.offset), timestamp_ms: null })))
    out.sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.partition - b.partition))
    return { offsets: out }
  }

  async op_create_topics (args, deadline) {
    const admin = await this.connectedAdmin()
    const out = []
    for (const t of args.topics) {
      const topic = {
        topic: t.name,
        numPartitions: Number(t.partitions === undefined ? 1 : t.partitions),
        replicationFactor: Number(t.replication_factor === undefined ? 1 : t.replication_factor),
        configEntries: Object.entries(t.config || {}).map(([name, value]) => ({ name, value: String(value) }))
      }
      try {
        const created = await admin.createTopics({ topics: [topic], waitForLeaders: true, timeout: Math.max(1, deadline.remainingMs()) })
        out.push({
          name: t.name,
          error: created
            ? null
            : { ...new OpError('TOPIC_ALREADY_EXISTS', `KafkaJS createTopics() resolved false: topic ${t.name} exists`).info, code: ERRORS.code('TOPIC_ALREADY_EXISTS'), origin: 'client', client_class: 'createTopics() === false' }
        })
      } catch (err) {
        const first = err && Array.isArray(err.errors) && err.errors.length ? err.errors[0] : err
        out.push({ name: t.name, error: this.normalise(first, 'create_topics') })
      }
    }
    return { topics: out }
  }
}

/** [{topic, partition, offset, metadata?}] -> KafkaJS's [{topic, partitions: [{partition, offset}]}]. */
function byTopic (offsets) {
  const topics = new Map()
  for (const o of offsets) {
    if (!topics.has(o.topic)) topics.set(o.topic, [])
    const p = { partition: Number(o.partition), offset: String(o.offset) }
    if (o.metadata !== undefined && o.metadata !== null) p.metadata = o.metadata
    topics.get(o.topic).push(p)
  }
  return [...topics].map(([topic, partitions]) => ({ topic, partitions }))
}

/** Header list [[name, payload], ...] -> KafkaJS's header object, refusing an order it cannot keep. */
function headerObject (headers) {
  const out = {}
  let last = null
  for (const [name, payload] of headers) {
    const value = decodeBytes(payload)
    if (name in out) {
      if (name !== last) throw new OpError('INVALID_ARGUMENT', `KafkaJS takes headers as an object: header ${JSON.stringify(name)} repeats after another name, and that order cannot be kept`)
      out[name] = [].concat(out[name], [value])
    } else {
      out[name] = value
    }
    last = name
  }
  return out
}

function recordRow (topic, partition, m) {
  const headers = []
  for (const [name, value] of Object.entries(m.headers || {})) {
    for (const v of Array.isArray(value) ? value : [value]) headers.push([name, encodeBytes(v)])
  }
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: encodeBytes(m.key),
    value: encodeBytes(m.value),
    headers,
    timestamp_ms: m.timestamp !== undefined && Number(m.timestamp) >= 0 ? Number(m.timestamp) : null
  }
}

/** A partition assigner that only keeps the cluster KafkaJS hands to assigners, and assigns like
 * KafkaJS's default (round robin) -- for consumers that never join (list_offsets). */
function captureCluster (holder) {
  const { roundRobin } = require('kafkajs').PartitionAssigners
  return args => {
    holder.cluster = args.cluster
    return roundRobin(args)
  }
}

/** The assign-mode assigner: this consumer is alone in its group and gets exactly `wanted`. */
function fixedAssigner (wanted, holder) {
  return ({ cluster }) => {
    holder.cluster = cluster
    return {
      name: 'KconformFixedAssigner',
      version: 1,
      async assign ({ members }) {
        return members.map((m, i) => ({
          memberId: m.memberId,
          memberAssignment: AssignerProtocol.MemberAssignment.encode({ version: 1, assignment: i === 0 ? wanted : {}, userData: Buffer.alloc(0) })
        }))
      },
      protocol ({ topics }) {
        return { name: 'KconformFixedAssigner', metadata: AssignerProtocol.MemberMetadata.encode({ version: 1, topics, userData: Buffer.alloc(0) }) }
      }
    }
  }
}

if (require.main === module) {
  serve(new KafkaJSDriver())
}

module.exports = { KafkaJSDriver, headerObject, byTopic }
