'use strict'
// The Fastify plugin over real HTTP, on mem: refusals with sluice's
// headers and body, leases given back after a thrown handler and a closed
// connection, a lock's 409, input errors, unmatched routes, and the
// addon's handle lifetime.
const test = require('node:test')
const assert = require('node:assert')
const http = require('node:http')
const path = require('node:path')
const { Sluice } = require('..')
const { SRC, SECRET, BASE, writePolicy, startApp, request, agent } = require('./helpers')
const { until } = require('./helpers')

const policy = writePolicy(`
attributes = [ "user", "book" ];
limits = {
  burst = { algorithm = "gcra"; scope = [ "user" ]; rate = 1; period_ms = 60000;
            burst = 3; unit = "requests"; };
  jobs = { algorithm = "concurrency"; scope = [ "user" ]; max = 1; ttl_ms = 600000; };
  books = { algorithm = "lock"; scope = [ "user", "book" ]; ttl_ms = 600000; };
};
routes = (
  { method = "GET"; route = "/burst"; limits = ( "burst" ); },
  { method = "POST"; route = "/jobs/*"; limits = ( "jobs" ); },
  { method = "POST"; route = "/books/*"; limits = ( "books" ); }
);
`)

const attributes = {
  user: (request) => request.headers['x-user'],
  book: (request) => request.url.split('/')[2]
}

// Routes whose handler throws, or holds until the test lets it go; every
// admitted request is kept (an onRequest hook after the plugin's), so the
// test can wait for its leases to be given back.
function jobRoutes (held, admitted) {
  return (app) => {
    const hold = async (request) => {
      await new Promise((resolve) => held.push({ request, resolve }))
      return { held: true }
    }
    app.post('/jobs/throw', async () => { throw new Error('the handler failed') })
    app.post('/jobs/hold', hold)
    app.post('/books/:book', hold)
    app.addHook('onRequest', (request, reply, done) => {
      admitted.push(request)
      done()
    })
  }
}

// Once a request's leases are back in the store.
async function released (request) {
  await until(() => request.sluice.releasing !== null)
  assert.strictEqual(await request.sluice.releasing, null)
}


test('a refusal is sluice\'s answer: 429, Retry-After, RateLimit, problem+json', async (t) => {
  const { app, url } = await startApp({ policy, clockMs: 0, jitter: false, attributes })
  t.after(() => app.close())
  for (let i = 0; i < 3; i++) {
    const res = await request(url, 'GET', '/burst', { 'x-user': 'ann' })
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.headers['ratelimit-limit'], '3')
    assert.strictEqual(res.headers['ratelimit-remaining'], String(2 - i))
    assert.deepStrictEqual(JSON.parse(res.body), { limit: 'burst', remaining: 2 - i })
  }
  const res = await request(url, 'GET', '/burst', { 'x-user': 'ann' })
  assert.strictEqual(res.status, 429)
  assert.strictEqual(res.headers['content-type'], 'application/problem+json')
  assert.strictEqual(res.headers['retry-after'], '60') // 1 per minute, no jitter
  assert.strictEqual(res.headers['ratelimit-remaining'], '0')
  const body = JSON.parse(res.body)
  assert.strictEqual(body.status, 429)
  assert.ok(body.type.startsWith(BASE), body.type)
  assert.match(body.detail, /burst/)
  // another user's scope is untouched; time refills ann's
  assert.strictEqual((await request(url, 'GET', '/burst', { 'x-user': 'bob' })).status, 200)
  app.sluice.setTime(60000)
  assert.strictEqual((await request(url, 'GET', '/burst', { 'x-user': 'ann' })).status, 200)
})

test('a thrown handler gives its lease back', async (t) => {
  const held = []
  const admitted = []
  const { app, url } = await startApp({ policy, attributes }, jobRoutes(held, admitted))
  t.after(() => app.close())
  // max = 1: each of these would be refused if the one before kept its lease
  for (let i = 0; i < 3; i++) {
    const res = await request(url, 'POST', '/jobs/throw', { 'x-user': 'ann' })
    assert.strictEqual(res.status, 500)
    await released(admitted[i])
  }
  // the lease is real: while one job is held, another is refused
  const first = request(url, 'POST', '/jobs/hold', { 'x-user': 'ann' })
  await until(() => held.length === 1)
  const refused = await request(url, 'POST', '/jobs/hold', { 'x-user': 'ann' })
  assert.strictEqual(refused.status, 429)
  assert.strictEqual(JSON.parse(refused.body).status, 429)
  held[0].resolve()
  assert.strictEqual((await first).status, 200)
  await released(admitted[3])
  const again = request(url, 'POST', '/jobs/hold', { 'x-user': 'ann' })
  await until(() => held.length === 2)
  held[1].resolve()
  assert.strictEqual((await again).status, 200)
})

test('a connection closed before the answer gives its lease back', async (t) => {
  const held = []
  const { app, url } = await startApp({ policy, attributes }, jobRoutes(held, []))
  t.after(() => app.close())
  const req = http.request(url + '/jobs/hold', { method: 'POST', headers: { 'x-user': 'cy' } })
  req.on('error', () => {})
  req.end()
  await until(() => held.length === 1)
  const closed = new Promise((resolve) => held[0].request.raw.once('close', resolve))
  req.destroy()
  await closed
  await released(held[0].request)
  const next = request(url, 'POST', '/jobs/hold', { 'x-user': 'cy' })
  await until(() => held.length === 2)
  held[1].resolve()
  assert.strictEqual((await next).status, 200)
  held[0].resolve()
})

test('a lock answers 409 while held, per book', async (t) => {
  const held = []
  const { app, url } = await startApp({ policy, attributes, jitter: false }, jobRoutes(held, []))
  t.after(() => app.close())
  const first = request(url, 'POST', '/books/b1', { 'x-user': 'ann' })
  await until(() => held.length === 1)
  const conflict = await request(url, 'POST', '/books/b1', { 'x-user': 'ann' })
  assert.strictEqual(conflict.status, 409)
  assert.strictEqual(conflict.headers['content-type'], 'application/problem+json')
  assert.ok(Number(conflict.headers['retry-after']) >= 1)
  const other = request(url, 'POST', '/books/b2', { 'x-user': 'ann' })
  await until(() => held.length === 2)
  held[1].resolve()
  assert.strictEqual((await other).status, 200)
  held[0].resolve()
  assert.strictEqual((await first).status, 200)
})

test('input errors are 400 naming the field; unmatched routes pass', async (t) => {
  const { app, url } = await startApp({ policy, attributes })
  t.after(() => app.close())
  const res = await request(url, 'GET', '/burst', {}) // no x-user
  assert.strictEqual(res.status, 400)
  const body = JSON.parse(res.body)
  assert.strictEqual(body.code, 'SLUICE_EINVAL')
  assert.match(body.message, /request attrs|user/)
  const free = await request(url, 'GET', '/elsewhere', {})
  assert.strictEqual(free.status, 200)
  assert.strictEqual(free.headers['ratelimit-limit'], undefined)
})

test('the ledger file: tenant, key and tier from the request option, costs from attributes', async (t) => {
  const { app, url } = await startApp({
    policy: path.join(SRC, 'etc', 'ledger.conf'), clockMs: 0, jitter: false,
    request: (request) => ({ tenant: 'acme', key: request.headers['x-key'], tier: 'sandbox' }),
    attributes: {
      ledger: (request) => request.headers['x-ledger'],
      export_range_s: (request) => request.headers['x-range']
    }
  })
  t.after(() => app.close())
  // sandbox: a key's bucket of 300 points, no refill at a stopped clock.
  // An export costs 50 over 90 days (7,776,000 s), else 25; a reconcile 10.
  const steps = [
    ['GET', '/v1/reports/audit-export', { 'x-range': '8000000' }, 250],
    ['GET', '/v1/reports/audit-export', { 'x-range': '0' }, 225], // not given
    ['POST', '/v1/ledgers/reconcile', { 'x-ledger': 'L1' }, 215],
    ['GET', '/v1/items', {}, 214]
  ]
  for (const [method, route, headers, left] of steps) {
    const res = await request(url, method, route, { 'x-key': 'k1', ...headers })
    assert.strictEqual(res.status, 200, `${method} ${route}: ${res.body}`)
    assert.strictEqual(res.headers['ratelimit-remaining'], String(left), `${method} ${route}`)
  }
  // The sandbox's hourly cap of 2 exports binds the third, whatever it costs
  const res = await request(url, 'GET', '/v1/reports/audit-export', { 'x-key': 'k1', 'x-range': '0' })
  assert.strictEqual(res.status, 429)
  assert.deepStrictEqual(JSON.parse(res.body)['violated-policies'], ['exports_per_hour'])
  // A reconcile names its ledger (the lock's scope): without one, 400
  const bad = await request(url, 'POST', '/v1/ledgers/reconcile', { 'x-key': 'k1' })
  assert.strictEqual(bad.status, 400)
  assert.match(JSON.parse(bad.body).message, /ledger/)
  assert.strictEqual((await request(url, 'GET', '/v1/items', { 'x-key': 'k2' })).status, 200)
})

test('a cost from the request option is refused, not ignored', async (t) => {
  const { app, url } = await startApp({
    policy: path.join(SRC, 'etc', 'ledger.conf'),
    request: () => ({ tenant: 'acme', key: 'k1', tier: 'sandbox', cost: 100 })
  })
  t.after(() => app.close())
  const res = await request(url, 'GET', '/v1/items', {})
  assert.strictEqual(res.status, 500)
  assert.match(JSON.parse(res.body).message, /request\(\) gave a cost/)
})

test('report: the response\'s status as an attribute, for reported strikes', async (t) => {
  // The bindings' tests' one sign-in policy.
  const login = path.join(SRC, 'tests', 'common', 'login.conf')
  const reports = []
  let reached = 0
  const { app, url } = await startApp({
    policy: login, clockMs: 0, jitter: false,
    attributes: { user: (request) => request.headers['x-user'] },
    report: (request, reply) => ({ result: String(reply.statusCode) })
  }, (app) => {
    app.post('/login', async (request, reply) => {
      reached++
      if (request.headers['x-secret'] !== 'good') reply.code(401)
      return 'login'
    })
    app.addHook('onResponse', async (request) => { reports.push(request.sluice && request.sluice.reporting) })
  })
  t.after(() => app.close())
  const login1 = (user, secret) => request(url, 'POST', '/login', { 'x-user': user, 'x-secret': secret })
  const statuses = []
  for (const secret of ['good', 'good', 'bad', 'bad', 'bad']) {
    statuses.push((await login1('ann', secret)).status)
    await until(() => reports.length === statuses.length)
    assert.strictEqual(await reports[reports.length - 1], null) // reported, no error
  }
  assert.deepStrictEqual(statuses, [200, 200, 401, 401, 401]) // 200s strike nothing
  const boxed = await login1('ann', 'good')
  assert.strictEqual(boxed.status, 429)
  assert.strictEqual(boxed.headers['x-penalty-box-status'], 'Active-Lockout')
  assert.strictEqual(reached, 5, 'a boxed sign-in reached the handler')
  assert.strictEqual((await login1('bob', 'good')).status, 200)
})

test('an answer\'s text: a body keeps its UTF-8, header values come through', () => {
  // An admission's text (header values only, ASCII) is made a one-byte
  // string, a refusal's (a body naming the route) is decoded as UTF-8.
  const s = new Sluice({ policy, secret: SECRET, problemBase: BASE })
  const q = { method: 'POST', route: '/books/café', attrs: { user: 'ü', book: 'ß' } }
  const first = s.decideSync(q)
  assert.strictEqual(first.allowed, true)
  assert.deepStrictEqual(first.headers, {
    'ratelimit-limit': '1', 'ratelimit-remaining': '0', 'ratelimit-reset': '600'
  })
  const second = s.decideSync(q)
  assert.strictEqual(second.status, 409)
  assert.strictEqual(JSON.parse(second.body).instance, '/books/café')
  s.close()
})

test('the handle: async decisions outlive close(), then it refuses', async () => {
  const s = new Sluice({ policy, secret: SECRET, problemBase: BASE, async: true })
  const q = { method: 'GET', route: '/burst', attrs: { user: 'dee' } }
  const pending = [s.decide(q), s.decide(q), s.decide(q), s.decide(q)]
  s.close() // before the thread pool has run them
  const rs = await Promise.all(pending)
  assert.deepStrictEqual(rs.map((r) => r.status).sort(), [200, 200, 200, 429]) // in any order: the pool's
  const open = new Sluice({ policy, secret: SECRET, problemBase: BASE })
  for (const k of ['cost', 'class']) { // the built-in classes' fields: refused, not ignored
    assert.throws(() => open.decideSync({ ...q, [k]: 5 }), new RegExp(`request.${k} is not read`))
  }
  open.close()
  assert.throws(() => s.decideSync(q), /closed/)
  await assert.rejects(s.release(q, 5n), /closed/) // rejects, never throws
  s.close() // a second close is harmless
  assert.throws(() => new Sluice({ policy: '/nonexistent.conf', secret: SECRET, problemBase: BASE }), /sluice: open: /)
  assert.throws(() => new Sluice({ policy, secret: Buffer.alloc(3), problemBase: BASE }), /secret/)
  assert.throws(() => new Sluice({ policy, secret: SECRET }), /problemBase/)
  assert.throws(() => new Sluice({ policy, secret: SECRET, problemBase: BASE, headerForm: 7 }), /headerForm/)
  assert.throws(() => new Sluice({ policy, secret: SECRET, problemBase: BASE, clockMs: 1e300 }), /clockMs/)
})

test.after(() => agent.destroy())
