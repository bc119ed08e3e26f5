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
const { SRC, SECRET, BASE, writePolicy, request, agent } = require('./helpers')
const path = require('node:path')
const { until } = require('./helpers')
const { llmTrace, llmSettleTrace, compare } = require('./traces')

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
// gets the C library's answers on mem.  A long read timeout: the store's
// default (tens of ms) is a production figure, and a loaded test machine
// that holds one call that long would turn an answer into a fail-closed 503.
test('LLM gateway policy on Redis: the C library\'s answers', { skip: !nodes && 'no Redis' }, async (t) => {
  await compare(t, 'llm-gateway.conf', llmTrace(300), `redis:nodes=${nodes};timeout_ms=60000`)
  // settled on Redis (the thread pool) as the C library settles on mem
  await compare(t, 'llm-gateway.conf', llmSettleTrace(300), `redis:nodes=${nodes};timeout_ms=60000;prefix=settle:`)
})

// A settle whose store call fails (the server stopped under it, a short
// timeout) resolves to the error's name and is logged: the request's
// answer had gone, the process goes on answering (a route on mem while
// the server is stopped), and once it runs again Redis decides as before.
test('a settle that fails on a stopped Redis neither crashes nor blocks', { skip: !nodes && 'no Redis' }, async (t) => {
  const a = Fastify()
  const settles = []
  const llm = {}
  for (const n of ['org', 'project', 'model', 'tokens']) llm[n] = (request) => request.headers['x-' + n]
  await a.register(async (scope) => {
    await scope.register(sluicePlugin, {
      policy: path.join(SRC, 'etc', 'llm-gateway.conf'), secret: SECRET, problemBase: BASE,
      attributes: llm, store: `redis:nodes=${nodes};timeout_ms=500`,
      settle: (request, reply) => ({ tokens: reply.getHeader('x-tokens-used') })
    })
    scope.post('/v1/chat/completions', async (request, reply) => {
      reply.header('x-tokens-used', '7')
      if (request.headers['x-stop'] === '1') process.kill(pid, 'SIGSTOP') // before the settle
      return { ok: true }
    })
    scope.addHook('onResponse', async (request) => { settles.push(request.sluice.settling) })
  })
  await a.register(async (scope) => {
    await scope.register(sluicePlugin, { policy, secret: SECRET, problemBase: BASE, attributes, store: 'mem' })
    scope.get('/mem/calls', async () => ({ ok: true }))
  })
  const url = await a.listen({ port: 0, host: '127.0.0.1' })
  t.after(() => a.close())
  const h = { 'x-org': 'o1', 'x-project': 'p1', 'x-model': 'm1', 'x-tokens': '100' }
  // warm, and settled on a running server
  assert.strictEqual((await request(url, 'POST', '/v1/chat/completions', h)).status, 200)
  await until(() => settles.length === 1)
  assert.strictEqual(await settles[0], null)
  let resumed = false
  try {
    const r = await request(url, 'POST', '/v1/chat/completions', { ...h, 'x-stop': '1' })
    assert.strictEqual(r.status, 200, 'the answer went before the settle')
    for (let i = 0; i < 5; i++) {
      assert.strictEqual((await request(url, 'GET', '/mem/calls', { 'x-user': 'm' })).status, 200)
    }
    await until(() => settles.length === 2)
    const err = await settles[1]
    assert.ok(typeof err === 'string' && err.startsWith('SLUICE_E'), String(err))
    process.kill(pid, 'SIGCONT')
    resumed = true
    assert.strictEqual((await request(url, 'POST', '/v1/chat/completions', h)).status, 200)
    await until(() => settles.length === 3)
    assert.strictEqual(await settles[2], null)
  } finally {
    if (!resumed) process.kill(pid, 'SIGCONT')
  }
})

test.after(() => agent.destroy())
