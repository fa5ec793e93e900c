// KafkaJS through the gateway, driven by tests/clients/test_matrix.py.
//
//   node matrix.js round-trip BOOTSTRAP TOPIC MESSAGES GROUP
//     admin create (3 partitions), produce MESSAGES (acks=all), consume them in GROUP,
//     admin delete; prints {"created", "produced", "consumed", "deleted"} as JSON.
//   node matrix.js throttled BOOTSTRAP TOPIC CLIENT_ID BYTES
//     produce BYTES of 10 kB records (acks=1) as CLIENT_ID, one request at a time; prints
//     {"seconds", "bytes"}. KafkaJS honours throttle_time_ms (KIP-219) on top of the muting.
//
// KAFKAJS_SASL (JSON, KafkaJS's sasl option, e.g. {"mechanism": "scram-sha-512", "username":
// ..., "password": ...}) or KAFKAJS_OAUTH_TOKEN (a JWT: OAUTHBEARER with that token), and
// KAFKAJS_CA (a PEM file: TLS trusting it) secure the connections.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

function saslOption() {
  const token = process.env.KAFKAJS_OAUTH_TOKEN
  if (token) return { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: token }) }
  return process.env.KAFKAJS_SASL ? JSON.parse(process.env.KAFKAJS_SASL) : undefined
}

const sasl = saslOption()
const ssl = process.env.KAFKAJS_CA ? { ca: [fs.readFileSync(process.env.KAFKAJS_CA)] } : undefined

const [mode, bootstrap, topic, ...rest] = process.argv.slice(2)

function client(clientId) {
  return new Kafka({
    clientId,
    brokers: [bootstrap],
    logLevel: logLevel.ERROR,
    retry: { retries: 10, initialRetryTime: 100 },
    sasl,
    ssl,
  })
}

async function roundTrip(messages, group) {
  const kafka = client('matrix-kafkajs')
  const admin = kafka.admin()
  await admin.connect()
  const created = await admin.createTopics({
    topics: [{ topic, numPartitions: 3, replicationFactor: 1 }],
    waitForLeaders: true,
  })
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const values = []
  for (let i = 0; i < messages; i++) values.push(`message-${i}`)
  for (let i = 0; i < messages; i += 500) {
    await producer.send({
      topic,
      acks: -1,
      messages: values.slice(i, i + 500).map((value) => ({ value })),
    })
  }
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 1000 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const seen = new Set()
  let received = 0
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${received} of ${messages}`)), 60000)
    consumer
      .run({
        eachMessage: async ({ message }) => {
          received += 1
          seen.add(message.value.toString())
          if (received >= messages) {
            clearTimeout(timer)
            resolve()
          }
        },
      })
      .catch(reject)
  })
  await consumer.disconnect()

  await admin.deleteTopics({ topics: [topic] })
  const remaining = await admin.listTopics()
  await admin.disconnect()
  const exactlyOnce = received === messages && values.every((v) => seen.has(v))
  return { created, produced: messages, consumed: received, exactlyOnce, deleted: !remaining.includes(topic) }
}

async function throttled(clientId, bytes) {
  const kafka = client(clientId)
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const value = Buffer.alloc(10000, 'v')
  const started = Date.now()
  let sent = 0
  while (sent < bytes) {
    await producer.send({ topic, acks: 1, messages: [{ value }] })
    sent += value.length
  }
  const seconds = (Date.now() - started) / 1000
  await producer.disconnect()
  return { seconds, bytes: sent }
}

async function main() {
  let result
  if (mode === 'round-trip') {
    result = await roundTrip(Number(rest[0]), rest[1])
  } else if (mode === 'throttled') {
    result = await throttled(rest[0], Number(rest[1]))
  } else {
    throw new Error(`unknown mode ${mode}`)
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`${error.stack || error}\n`)
    process.exit(1)
  },
)
