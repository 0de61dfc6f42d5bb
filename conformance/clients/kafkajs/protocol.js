'use strict'
/**
 * The driver protocol's side in Node (conformance/clients/protocol.py says what it is): one JSON
 * request a line on stdin, one reply a line on stdout, logs on stderr, exit when stdin closes.
 *
 * Why the deadline is a race here: a Node library call cannot be interrupted and most KafkaJS calls
 * take no timeout, so every op runs as a promise raced against its deadline. At the deadline the
 * driver answers DEADLINE_EXCEEDED (origin "driver") and reads the next request; the op's promise
 * carries on inside the driver, as a library call on a worker thread does in the Python drivers.
 */

const fs = require('fs')
const readline = require('readline')

const PROTOCOL_VERSION = 1

/** An outcome the driver decides (not one the library raised). */
class OpError extends Error {
  constructor (name, message, extra = {}) {
    super(message)
    this.info = {
      name,
      code: null,
      retriable: false,
      abortable: false,
      fatal: false,
      fenced: false,
      message,
      client_class: '',
      origin: 'driver',
      ...extra
    }
  }
}

/** Kafka's error table ({code: name}), written by conformance.clients.errors.error_table_file. */
function loadErrorTable (argv) {
  const at = argv.indexOf('--errors')
  if (at < 0 || !argv[at + 1]) throw new Error('usage: driver.js --errors KAFKA_ERRORS_JSON')
  const byCode = JSON.parse(fs.readFileSync(argv[at + 1], 'utf8'))
  const byName = {}
  for (const [code, name] of Object.entries(byCode)) byName[name] = Number(code)
  return {
    name: code => byCode[String(code)] || null,
    code: name => (name in byName ? byName[name] : null)
  }
}

class Deadline {
  constructor (budgetMs) {
    this.budgetMs = budgetMs
    this.end = Date.now() + budgetMs
  }

  remainingMs () {
    return Math.max(0, this.end - Date.now())
  }

  get expired () {
    return Date.now() >= this.end
  }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, Math.max(0, ms)))

/** Payload (null | UTF-8 string | {base64}) -> Buffer or null. */
function decodeBytes (payload) {
  if (payload === null || payload === undefined) return null
  if (typeof payload === 'string') return Buffer.from(payload, 'utf8')
  if (typeof payload === 'object' && Object.keys(payload).length === 1 && typeof payload.base64 === 'string') {
    return Buffer.from(payload.base64, 'base64')
  }
  throw new OpError('INVALID_ARGUMENT', `payload must be null, a string or {"base64": ...}, got ${JSON.stringify(payload)}`)
}

/** Buffer or null -> payload: a string when the bytes are valid UTF-8, else {base64}. */
function encodeBytes (buf) {
  if (buf === null || buf === undefined) return null
  const bytes = Buffer.isBuffer(buf) ? buf : Buffer.from(String(buf), 'utf8')
  const text = bytes.toString('utf8')
  if (Buffer.from(text, 'utf8').equals(bytes)) return text
  return { base64: bytes.toString('base64') }
}

/**
 * Answer requests until stdin closes. `driver.handle(op, args, deadline)` runs one op and returns its
 * data; `driver.normalise(err, op)` turns a library failure into an error dict.
 */
async function serve (driver) {
  const out = fd => line => fs.writeSync(fd, line + '\n')
  const reply = out(1)
  // the protocol owns stdout: anything the library prints goes to stderr
  for (const level of ['log', 'info', 'warn', 'debug', 'error']) console[level] = (...a) => process.stderr.write(a.join(' ') + '\n')
  process.on('unhandledRejection', err => process.stderr.write(`unhandled rejection: ${err && err.stack ? err.stack : err}\n`))
  process.on('uncaughtException', err => process.stderr.write(`uncaught exception: ${err && err.stack ? err.stack : err}\n`))

  const rl = readline.createInterface({ input: process.stdin, terminal: false })
  try {
    for await (const raw of rl) {
      const line = raw.trim()
      if (!line) continue
      let request
      try {
        request = JSON.parse(line)
        if (!request || typeof request !== 'object' || Array.isArray(request)) throw new Error('request is not a JSON object')
      } catch (err) {
        reply(JSON.stringify({ id: null, ok: false, error: new OpError('DRIVER_ERROR', `malformed request: ${err.message}`).info }))
        continue
      }
      reply(JSON.stringify(await answer(driver, request)))
    }
  } catch (err) {
    // Nobody left to answer (EPIPE: the runner is gone). Exit rather than return: KafkaJS's
    // reconnect timers would keep the process alive, spinning on a dead broker.
    process.stderr.write(`driver stops: ${err && err.stack ? err.stack : err}\n`)
    process.exit(1)
  }
  process.exit(0)
}

async function answer (driver, request) {
  const id = request.id === undefined ? null : request.id
  const op = request.op
  const budget = Number.isFinite(Number(request.deadline_ms)) ? Number(request.deadline_ms) : 30000
  const deadline = new Deadline(budget)
  const args = {}
  for (const [k, v] of Object.entries(request)) if (!['id', 'op', 'deadline_ms'].includes(k)) args[k] = v
  let timer
  const expired = new Promise(resolve => { timer = setTimeout(() => resolve(EXPIRED), deadline.remainingMs()) })
  const running = (async () => driver.handle(op, args, deadline))()
  running.catch(() => {}) // a late failure of an op already answered DEADLINE_EXCEEDED is nobody's
  try {
    const data = await Promise.race([running, expired])
    if (data === EXPIRED) {
      return { id, ok: false, error: new OpError('DEADLINE_EXCEEDED', `${op}: the library call was still running after ${budget} ms`).info }
    }
    return { id, ok: true, data: data || {} }
  } catch (err) {
    if (err instanceof OpError) return { id, ok: false, error: err.info }
    try {
      return { id, ok: false, error: await driver.normalise(err, op) }
    } catch (nerr) {
      return { id, ok: false, error: new OpError('DRIVER_ERROR', `normalising ${err} failed: ${nerr}`, { traceback: String(nerr.stack) }).info }
    }
  } finally {
    clearTimeout(timer)
  }
}

const EXPIRED = Symbol('deadline expired')

module.exports = { PROTOCOL_VERSION, OpError, Deadline, loadErrorTable, decodeBytes, encodeBytes, serve, sleep }
