'use strict'
// The plugin on a real Redis (tests/redis/harness.py starts it and sets
// SLUICE_REDIS_NODES / SLUICE_REDIS_PIDS): decisions on Redis run on the
// thread pool, so a stalled server (SIGSTOP) holds only the requests that
// need it, while a route on mem in the same process answers; once the
// server runs again, the held requests are decided.
const test = require('node:test')
const assert = require('node:assert')
const Fastify = require('fastify')
const sluicePlugin = require('..')
const { SECRET, BASE, writePolicy, request, agent } = require('./helpers')
const { until } = require('./helpers')
const { llmTrace, compare } = require('./traces')

const nodes = process.env.SLUICE_REDIS_NODES
const pid = Number((process.env.SLUICE_REDIS_PIDS || '').split(',')[0].split(':')[1])

const policy = writePolicy(`
attributes = [ "user" ];
limits = {
  calls = { algorithm = "gcra"; scope = [ "user" ]; rate = 100; period_ms = 1000;
            burst = 100; unit = "requests"; };
  jobs = { algorithm = "concurrency"; scope = [ "user" ]; max = 1; ttl_ms = 600000; };
};
routes = (
  { method = "GET"; route = "/*"; limits = ( "calls" ); },
  { method = "POST"; route = "/redis/jobs"; limits = ( "jobs" ); }
);
`)
const attributes = { user: (request) => request.headers['x-user'] }

const admitted = [] // the Redis scope's admitted requests
const leases = [] // the leases the throwing handler was given


async function app (redisTimeoutMs) {
  const a = Fastify()
  // Each store in its own encapsulated context: the hook applies there.
  await a.register(async (scope) => {
    // a long read timeout: a stalled server holds the call, not a 503
    await scope.register(sluicePlugin, {
      policy, secret: SECRET, problemBase: BASE, attributes,
      store: `redis:nodes=${nodes};timeout_ms=${redisTimeoutMs}`
    })
    scope.get('/redis/calls', async (request) => ({ outcome: request.sluice.decision.outcome }))
    scope.post('/redis/jobs', async (request) => {
      leases.push(request.sluice.decision.leaseId)
      throw new Error('failed')
    })
    // after the plugin's onRequest: the admitted requests
    scope.addHook('onRequest', (request, reply, done) => {
      admitted.push(request)
      done()
    })
  })
  await a.register(async (scope) => {
    await scope.register(sluicePlugin, { policy, secret: SECRET, problemBase: BASE, attributes, store: 'mem' })
    scope.get('/mem/calls', async (request) => ({ outcome: request.sluice.decision.outcome }))
  })
  return { a, url: await a.listen({ port: 0, host: '127.0.0.1' }) }
}

test('a stalled Redis does not stop a route on mem', { skip: !nodes && 'no Redis (run under tests/redis/harness.py)' }, async (t) => {
  const { a, url } = await app(60000)
  t.after(() => a.close())
  assert.strictEqual(a.sluice, undefined) // two plugins, each in its scope
  // warm: the Redis connection is up and the script loaded
  const w = await request(url, 'GET', '/redis/calls', { 'x-user': 'u' })
  assert.strictEqual(w.status, 200, w.body)
  process.kill(pid, 'SIGSTOP')
  let resumed = false
  try {
    const order = []
    // more stalled requests than the thread pool has threads (4)
    const held = []
    for (let i = 0; i < 8; i++) {
      held.push(request(url, 'GET', '/redis/calls', { 'x-user': 'u' + i }).then((r) => {
        order.push('redis'); return r
      }))
    }
    for (let i = 0; i < 20; i++) {
      const r = await request(url, 'GET', '/mem/calls', { 'x-user': 'm' })
      assert.strictEqual(r.status, 200)
      order.push('mem')
    }
    // every mem answer came while every Redis request was still held
    assert.deepStrictEqual(order, new Array(20).fill('mem'))
    process.kill(pid, 'SIGCONT')
    resumed = true
    const rs = await Promise.all(held)
    assert.deepStrictEqual(rs.map((r) => r.status), new Array(8).fill(200))
    assert.deepStrictEqual(rs.map((r) => JSON.parse(r.body).outcome), new Array(8).fill('allow'))
  } finally {
    if (!resumed) process.kill(pid, 'SIGCONT')
  }
})

test('on Redis a thrown handler gives its lease back', { skip: !nodes && 'no Redis' }, async (t) => {
  const { a, url } = await app(2000)
  t.after(() => a.close())
  admitted.length = 0
  // max = 1, and each request throws: every one admitted, never 429
  for (let i = 0; i < 4; i++) {
    const r = await request(url, 'POST', '/redis/jobs', { 'x-user': 'lease' })
    assert.strictEqual(r.status, 500, r.body)
    const s = admitted[i].sluice
    await until(() => s.releasing !== null)
    assert.strictEqual(await s.releasing, null) // the store call has completed
  }
  assert.strictEqual(leases.length, 4)
  assert.ok(leases.every((id) => id !== 0n), 'each request held a lease')
})

// On Redis (the thread-pool path, the Lua engine) the LLM-gateway trace
// gets the C library's answers on mem.
test('LLM gateway policy on Redis: the C library\'s answers', { skip: !nodes && 'no Redis' }, async (t) => {
  await compare(t, 'llm-gateway.conf', llmTrace(300), `redis:nodes=${nodes}`)
})

test.after(() => agent.destroy())
