'use strict'
// A kafkajs producer driven by the harness as a child process, in JSON lines: ops (config, send,
// flush, close) on stdin, events (ready, ack, error, stats, flushed, fatal) on stdout. Nothing else is
// ever printed on stdout; diagnostics and kafkajs's own logs go to stderr.
const readline = require('readline')
const { Kafka, logLevel, Partitioners } = require('kafkajs')
const { version: VERSION } = require('kafkajs/package.json')
// kafkajs's own retry defaults and protocol error table (pinned 2.2.4): the ready line reports the
// retry settings kafkajs will really use, and retry log lines carry only an error's message.
const RETRY_DEFAULTS = require(process.env.NODE_ENV === 'test' ? 'kafkajs/src/retry/defaults.test' : 'kafkajs/src/retry/defaults')
const { errorCodes } = require('kafkajs/src/protocol/error')

const CONNECT_TIMEOUT_MS = 30000
const CLOSE_TIMEOUT_MS = 10000
// kafkajs puts no bound on a batch; the broker refuses batches over max.message.bytes (1 MiB by
// default), which a partition's backlog after a move could exceed. librdkafka's batch.size default:
const MAX_BATCH_BYTES = 1000000
const RECORD_OVERHEAD = 64 // a record's framing and headers, roughly, counted against the cap
// settings keys, in kafkajs's own names, by where kafkajs takes them
const CLIENT_KEYS = ['connectionTimeout', 'authenticationTimeout', 'reauthenticationThreshold', 'requestTimeout', 'enforceRequestTimeout', 'ssl', 'sasl']
const PRODUCER_KEYS = ['retry', 'idempotent', 'maxInFlightRequests', 'metadataMaxAge', 'allowAutoTopicCreation']
const SEND_KEYS = ['acks', 'timeout', 'compression']

// ---- stdout: one JSON object a line, written once per turn of the event loop, never blocking it
let outBuf = []
let outWaiting = false // stdout's buffer is full: wait for 'drain'
let outScheduled = false
function emit (obj) {
  outBuf.push(JSON.stringify(obj))
  if (!outScheduled && !outWaiting) { outScheduled = true; setImmediate(flushOut) }
}
function flushOut () {
  outScheduled = false
  if (outBuf.length === 0) return
  const text = outBuf.join('\n') + '\n'
  outBuf = []
  if (!process.stdout.write(text)) {
    outWaiting = true
    process.stdout.once('drain', () => { outWaiting = false; flushOut() })
  }
}
// Exit only once stdout has taken every line (process.exit would drop a pipe's pending writes).
function exit (code) {
  if (outBuf.length) { process.stdout.write(outBuf.join('\n') + '\n'); outBuf = [] }
  process.stdout.write('', () => process.exit(code))
  setTimeout(() => process.exit(code), 2000).unref()
}
process.stdout.on('error', () => process.exit(1)) // the harness is gone (EPIPE)
const oneLine = s => String(s).replace(/\s+/g, ' ').trim()
let dead = false // a fatal line was printed: the rest of stdin is ignored
function fatal (error, code) {
  if (dead) return
  dead = true
  emit({ event: 'fatal', error: oneLine(error) })
  exit(code)
}
const now = () => Date.now() / 1000

// ---- retries kafkajs met inside a send, counted from its own log lines
// kafkajs 2.2.4 exposes no retry event: the send retrier (src/producer/sendMessages.js) logs each
// failed attempt at ERROR in the Producer namespace with {retryCount, retryTime}, as "Failed to send
// messages: <message>" (stale metadata, connection and retriable protocol errors) or "<message>"
// (others). Only the message survives, so the type is found from kafkajs's protocol error table
// (messages are unique) or, for its own client-side errors, from their fixed texts ('OTHER' if none).
// `errors` counts the retriable failed attempts by type, `retries` those kafkajs then retried (all
// but a send's last attempt). Not counted, as kafkajs logs them without a send's retry count: the
// cluster's own retries (metadata refresh, reconnecting to seed brokers) and per-request events.
const stats = { retries: 0, errors: {} }
let statsDirty = false
const BY_MESSAGE = new Map(errorCodes.map(e => [e.message, e]))
const CLIENT_ERRORS = [
  [/^Request .* timed out$/, 'KafkaJSRequestTimeoutError'],
  [/^Closed connection$/, 'KafkaJSConnectionClosedError'],
  [/^(Connection error: |Connection timeout$|Failed to connect: |Connection closed by the server$|Not connected$)/, 'KafkaJSConnectionError'],
  [/^(Producing to topic without metadata|Topic metadata not loaded)/, 'KafkaJSMetadataNotLoaded'],
  [/^(Broker .* not found|No brokers in the broker pool)/, 'KafkaJSBrokerNotFound'],
  [/^Timeout while acquiring lock/, 'KafkaJSLockTimeout']
]
let retryLimit = RETRY_DEFAULTS.retries // set from the effective settings once known
function countAttempt (message, retryCount) {
  const text = message.replace(/^Failed to send messages: /, '')
  const proto = BY_MESSAGE.get(text)
  const hit = proto ? null : CLIENT_ERRORS.find(([re]) => re.test(text))
  const type = proto ? proto.type : hit ? hit[1] : 'OTHER'
  // A non-retriable protocol error ends the send: it is the send's error event, not a retry. The
  // client-side errors are all retriable (KafkaJSError's default) as far as the message can tell.
  if (proto && !proto.retriable) return
  stats.errors[type] = (stats.errors[type] || 0) + 1
  // the attempt numbered retries is the last: its error is the send's outcome, not retried
  if (retryCount < retryLimit) stats.retries++
  statsDirty = true
}
// kafkajs's logs at WARN and above, one JSON line each on stderr; the retry lines are counted too
const logCreator = () => ({ namespace, label, log }) => {
  const { message, timestamp, logger, ...extra } = log
  if (namespace === 'Producer' && label === 'ERROR' && typeof extra.retryCount === 'number') countAttempt(message, extra.retryCount)
  process.stderr.write(JSON.stringify({ ts: timestamp, level: label, namespace, message, ...extra }) + '\n')
}

// ---- the producer
let cfg = null // the config op, checked
let producer = null
let sendOpts = null // acks/timeout(/compression) of every producer.send
let ready = false // connected: the lanes may send
let accepting = true // false once flushing or closing: later sends are refused
let open = 0 // sends not yet answered
let onAllAnswered = null // the flush's waiter
let activity = false // something happened since the last stats line
const lanes = new Map() // "topic\0partition" -> { topic, partition, queue, inFlight, timer, bytes }

// One answer per send, whatever answers first (ack, error, deadline or purge); later ones are dropped.
function answer (entry, obj) {
  if (entry.done) return
  entry.done = true
  open--
  activity = true
  emit(obj)
  if (open === 0 && onAllAnswered) onAllAnswered()
}
function fail (entry, error, written) {
  answer(entry, { event: 'error', id: entry.id, partition: entry.partition, error, written, ts: now() })
}
// "<TYPE>: <message>": the innermost cause's protocol type (else its name), so errors count by type
function describe (err) {
  let e = err
  while (e.cause && e.cause !== e) e = e.cause
  const type = e.type || e.name || 'Error'
  let msg = e.message
  if (err.name === 'KafkaJSNumberOfRetriesExceeded') msg = `${err.name} after ${err.retryCount} retries: ${msg}`
  else if (e !== err) msg = `${err.name}: ${msg}`
  return `${type}: ${oneLine(msg)}`
}

function onSend (op) {
  const { id, topic, partition, producer: pname } = op
  if (!Number.isSafeInteger(id) || id < 0 || typeof topic !== 'string' || !topic ||
      !Number.isInteger(partition) || partition < 0 || typeof pname !== 'string') {
    return fatal(`malformed send: ${JSON.stringify(op).slice(0, 200)}`, 2)
  }
  open++
  const entry = { id, partition, done: false, deadline: Date.now() + cfg.message_timeout_ms }
  if (!accepting) return fail(entry, 'DRAINING: send after flush or close; not sent', false)
  // value = the id's low `stamp` bytes (big-endian) + the body, as the Python side builds it
  const stamp = Buffer.alloc(8)
  stamp.writeBigUInt64BE(BigInt(id))
  const value = Buffer.concat([stamp.subarray(8 - cfg.stamp), cfg.body])
  entry.message = { partition, value, headers: { id: String(id), p: pname } }
  entry.bytes = value.length + RECORD_OVERHEAD
  const key = `${topic}\0${partition}`
  let lane = lanes.get(key)
  if (!lane) lanes.set(key, lane = { topic, partition, queue: [], inFlight: null, timer: null, bytes: 0 })
  lane.queue.push(entry)
  lane.bytes += entry.bytes
  entry.queued = Date.now()
  schedule(lane)
}

// kafkajs has no linger: a lane (topic-partition) gathers the sends of linger_ms into one
// producer.send. It keeps at most one send in flight, because kafkajs's idempotence takes a
// partition's sequence numbers per attempt and gives them back when the attempt fails: two sends
// of one partition in flight (they may reach different brokers during a move) would interleave
// their sequences (OUT_OF_ORDER_SEQUENCE_NUMBER) and their order.
function schedule (lane) {
  if (!ready || lane.inFlight || lane.timer || lane.queue.length === 0) return
  const wait = lane.bytes >= MAX_BATCH_BYTES ? 0 : lane.queue[0].queued + cfg.linger_ms - Date.now()
  if (wait <= 0) return dispatch(lane)
  lane.timer = setTimeout(() => { lane.timer = null; dispatch(lane) }, wait)
}
function dispatch (lane) {
  if (lane.timer) { clearTimeout(lane.timer); lane.timer = null }
  if (!ready || lane.inFlight) return
  const batch = []
  let bytes = 0
  while (lane.queue.length && (batch.length === 0 || bytes + lane.queue[0].bytes <= MAX_BATCH_BYTES)) {
    const e = lane.queue.shift()
    lane.bytes -= e.bytes
    if (e.done) continue // its deadline passed while queued
    batch.push(e)
    bytes += e.bytes
  }
  if (batch.length === 0) return
  lane.inFlight = batch
  producer.send({ ...sendOpts, topic: lane.topic, messages: batch.map(e => e.message) }).then(results => {
    const r = results.find(x => x.topicName === lane.topic && x.partition === lane.partition)
    const base = r ? Number(r.baseOffset) : NaN
    const ts = now()
    batch.forEach((e, i) => {
      if (Number.isFinite(base)) answer(e, { event: 'ack', id: e.id, partition: e.partition, offset: base + i, ts })
      else fail(e, `NO_OFFSET: kafkajs acknowledged the batch without a base offset for partition ${lane.partition}`, null)
    })
  }, err => {
    // it went through kafkajs's send path: it may have reached a broker whatever the error says
    const error = describe(err)
    batch.forEach(e => fail(e, error, null))
  }).finally(() => {
    lane.inFlight = null
    schedule(lane)
  })
}

// The per-message deadline (message_timeout_ms). kafkajs cannot cancel a send: an expired send in
// flight is answered now and its lane still waits for kafkajs's outcome (which is then dropped).
setInterval(() => {
  const t = Date.now()
  for (const lane of lanes.values()) {
    for (const e of lane.inFlight || []) if (!e.done && t >= e.deadline) fail(e, 'MESSAGE_TIMED_OUT: not acknowledged within message_timeout_ms', null)
    // queued in arrival order: expired ones are at the head (dropped, so a stuck lane holds no memory)
    while (lane.queue.length && (lane.queue[0].done || t >= lane.queue[0].deadline)) {
      const e = lane.queue.shift()
      lane.bytes -= e.bytes
      fail(e, 'MESSAGE_TIMED_OUT: not sent within message_timeout_ms (queued behind its partition\'s send)', false)
    }
  }
}, 100).unref()

setInterval(() => {
  if (!activity && !statsDirty) return
  activity = statsDirty = false
  emit({ event: 'stats', retries: stats.retries, errors: { ...stats.errors } })
}, 1000).unref()

// Everything still unanswered is answered as purged (written false if it never left its lane's queue).
function purge (why) {
  let n = 0
  for (const lane of lanes.values()) {
    for (const e of lane.inFlight || []) if (!e.done) { n++; fail(e, `PURGED: ${why}`, null) }
    for (const e of lane.queue) if (!e.done) { n++; fail(e, `PURGED: ${why}`, false) }
    lane.queue = []
    lane.bytes = 0
  }
  return n
}

function onFlush (op) {
  const timeout = op.timeout_ms === undefined ? 20000 : op.timeout_ms
  if (typeof timeout !== 'number' || timeout < 0) return fatal(`malformed flush: ${JSON.stringify(op)}`, 2)
  accepting = false
  // no more sends to wait for: lingering batches go now (unless there is no time to answer them)
  if (timeout > 0) for (const lane of lanes.values()) if (lane.timer) dispatch(lane)
  const done = () => {
    clearTimeout(timer)
    onAllAnswered = null
    emit({ event: 'flushed', outstanding: purge('not answered within the drain') })
  }
  const timer = setTimeout(done, timeout)
  if (open === 0) return done()
  onAllAnswered = done
}

let closing = false
function onClose () {
  if (closing) return
  closing = true
  accepting = false
  purge('closed before an answer')
  setTimeout(() => { process.stderr.write('kafkajs: disconnect took over 10 s, exiting anyway\n'); exit(0) }, CLOSE_TIMEOUT_MS).unref()
  Promise.resolve(producer && producer.disconnect()).catch(e => process.stderr.write(`kafkajs: disconnect: ${e.message}\n`)).finally(() => exit(0))
}

async function onConfig (op) {
  const bad = why => { throw new Error(`invalid config: ${why}`) }
  if (typeof op.bootstrap !== 'string' || !op.bootstrap.trim()) bad('bootstrap must be "host:port,..."')
  if (typeof op.client_id !== 'string' || !op.client_id) bad('client_id must be a non-empty string')
  if (typeof op.linger_ms !== 'number' || !(op.linger_ms >= 0)) bad('linger_ms must be a number >= 0')
  if (typeof op.message_timeout_ms !== 'number' || !(op.message_timeout_ms > 0)) bad('message_timeout_ms must be a number > 0')
  if (!Number.isInteger(op.stamp) || op.stamp < 0 || op.stamp > 8) bad('stamp must be an integer 0..8')
  if (typeof op.body_b64 !== 'string') bad('body_b64 must be a base64 string')
  const settings = op.settings == null ? {} : op.settings
  if (typeof settings !== 'object' || Array.isArray(settings)) bad('settings must be an object')
  const unknown = Object.keys(settings).filter(k => ![...CLIENT_KEYS, ...PRODUCER_KEYS, ...SEND_KEYS].includes(k))
  if (unknown.length) bad(`unknown kafkajs setting(s) ${unknown.join(', ')} (known: ${[...CLIENT_KEYS, ...PRODUCER_KEYS, ...SEND_KEYS].join(', ')})`)
  const pick = keys => Object.fromEntries(Object.entries(settings).filter(([k]) => keys.includes(k)))

  const producerConf = { idempotent: true, maxInFlightRequests: 1, ...pick(PRODUCER_KEYS) }
  // the broker's wait for acks: kafkajs's default (30 s), never past the message's deadline
  sendOpts = { acks: -1, timeout: Math.min(30000, op.message_timeout_ms), ...pick(SEND_KEYS) }
  if (producerConf.idempotent && sendOpts.acks !== -1) bad('an idempotent producer needs acks -1 (kafkajs refuses every send otherwise)')
  // The retry kafkajs really uses (src/index.js, src/producer/index.js): Kafka#producer always passes
  // an object, so the idempotent producer's documented default of MAX_SAFE_INTEGER retries never
  // applies: unless set, retries are kafkajs's general default (5).
  const effRetry = { ...RETRY_DEFAULTS, ...producerConf.retry }
  if (producerConf.idempotent && !(effRetry.retries >= 1)) bad('an idempotent producer needs retry.retries >= 1')
  retryLimit = effRetry.retries
  cfg = { ...op, body: Buffer.from(op.body_b64, 'base64') }

  const kafka = new Kafka({
    clientId: op.client_id,
    brokers: op.bootstrap.split(',').map(s => s.trim()).filter(Boolean),
    logLevel: logLevel.WARN,
    logCreator,
    ...pick(CLIENT_KEYS)
  })
  // Partitioners.DefaultPartitioner is kafkajs's default; naming it only silences its v2 warning.
  // Every message names its partition, which both partitioners honour.
  producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner, ...producerConf })
  let timer
  const deadline = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`could not connect to ${op.bootstrap} within ${CONNECT_TIMEOUT_MS / 1000} s`)), CONNECT_TIMEOUT_MS)
  })
  try {
    await Promise.race([producer.connect(), deadline])
  } catch (e) {
    throw new Error(e.message.startsWith('could not connect') ? e.message : `could not connect to ${op.bootstrap}: ${describe(e)}`)
  } finally {
    clearTimeout(timer)
  }
  const clientConf = pick(CLIENT_KEYS)
  emit({
    event: 'ready',
    library: 'kafkajs',
    version: VERSION,
    settings: {
      idempotent: producerConf.idempotent,
      acks: sendOpts.acks,
      maxInFlightRequests: producerConf.maxInFlightRequests,
      retry: effRetry,
      timeout: sendOpts.timeout,
      requestTimeout: clientConf.requestTimeout === undefined ? 30000 : clientConf.requestTimeout,
      connectionTimeout: clientConf.connectionTimeout === undefined ? 1000 : clientConf.connectionTimeout,
      ...(sendOpts.compression === undefined ? {} : { compression: sendOpts.compression }),
      linger_ms: op.linger_ms,
      message_timeout_ms: op.message_timeout_ms,
      max_batch_bytes: MAX_BATCH_BYTES
    }
  })
  ready = true
  for (const lane of lanes.values()) schedule(lane)
}

// ---- stdin: one op a line
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
let configured = false
rl.on('line', line => {
  if (dead || closing || !line.trim()) return
  let op
  try { op = JSON.parse(line) } catch (e) { return fatal(`malformed line (not JSON): ${line.slice(0, 200)}`, 2) }
  if (op === null || typeof op !== 'object') return fatal(`malformed line (not an object): ${line.slice(0, 200)}`, 2)
  if (!configured) {
    if (op.op !== 'config') return fatal(`the first line must be the config op, not ${JSON.stringify(op.op)}`, 2)
    configured = true
    return onConfig(op).catch(e => fatal(e.message, 1))
  }
  switch (op.op) {
    case 'send': return onSend(op)
    case 'flush': return onFlush(op)
    case 'close': return onClose()
    default: return fatal(`unknown op ${JSON.stringify(op.op)}`, 2)
  }
})
rl.on('close', onClose) // EOF: as close
process.on('unhandledRejection', e => process.stderr.write(`unhandled rejection: ${e && e.stack}\n`))
