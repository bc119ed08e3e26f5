'use strict'
// The traces the plugin and the C library (trace_decide.c) answer alike,
// and the comparison: the same trace through the Fastify plugin over real
// HTTP and through trace_decide, every answer the same (status, headers,
// body).  Both decide at the trace's time (a manual clock), without
// Retry-After jitter, in the 'both' header form.
const assert = require('node:assert')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { SRC, startApp, request, until } = require('./helpers')

function rng (seed) { // mulberry32: the same trace every run
  return () => {
    seed = (seed + 0x6D2B79F5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const pick = (r, xs) => xs[Math.floor(r() * xs.length)]

// Lines of [t_ms, method, route, ...attribute values] ('-': absent).
function githubTrace (n) {
  const r = rng(36)
  const lines = []
  let t = 1000
  for (let i = 0; i < n; i++) {
    t += Math.floor(r() * 60)
    const [method, route] = pick(r, [['GET', '/repos/a/b'], ['POST', '/repos/a/b/issues'],
      ['POST', '/gists'], ['GET', '/users/x'], ['DELETE', '/repos/a/b'], ['POST', '/repos/a/b/issues']])
    lines.push([t, method, route, r() < 0.05 ? '-' : pick(r, ['u1', 'u2', 'u3'])])
  }
  return { attrs: ['user'], lines }
}

function llmTrace (n) {
  const r = rng(37)
  const lines = []
  let t = 1000
  for (let i = 0; i < n; i++) {
    t += Math.floor(r() * 300)
    const route = pick(r, ['/v1/chat/completions', '/v1/completions', '/v1/chat/completions', '/health'])
    const tokens = r() < 0.05 ? '-' : String(1 + Math.floor(r() * r() * 60000))
    lines.push([t, route === '/health' ? 'GET' : 'POST', route, pick(r, ['o1', 'o2']),
      pick(r, ['p1', 'p2', 'p3']), pick(r, ['m1', 'm2']), tokens])
  }
  return { attrs: ['org', 'project', 'model', 'tokens'], lines }
}

// The LLM trace with a settle column: the tokens each request really used
// (more than charged, or less, or nothing: '-' leaves the charge), which
// the plugin's settle option and trace_decide report.
function llmSettleTrace (n) {
  const t = llmTrace(n)
  const r = rng(38)
  t.settle = 'tokens'
  for (const l of t.lines) l.push(r() < 0.3 ? '-' : String(Math.floor(r() * r() * 40000)))
  return t
}

// trace_decide's line for one answer of the plugin.
function pluginLine (res, names) {
  if (res.status === 400) { // the plugin's input error: code and field
    const b = JSON.parse(res.body)
    return `error ${b.code} ${/request (\w+):/.exec(b.message)[1]}`
  }
  let echo = null
  if (res.status === 200) echo = JSON.parse(res.body)
  if (echo !== null && echo.limit === null) return 'error SLUICE_ENOTFOUND route' // passed: no route
  const limit = echo ? echo.limit : null
  const hs = names.filter((h) => res.headers[h.toLowerCase()] !== undefined)
    .map((h) => `${h}=${res.headers[h.toLowerCase()]}`)
  return [res.status, limit, echo ? echo.remaining : null, ...hs, echo ? '-' : res.body].join('\t')
}

// trace_decide's line, with the fields the HTTP side cannot see for a
// refusal (the limit's name, its remaining: they are in the headers and
// body) left out, as pluginLine leaves them.
function cLine (line) {
  if (line.startsWith('error')) return { line, names: [] }
  const f = line.split('\t')
  const headers = f.slice(3, -1)
  const names = headers.map((h) => h.slice(0, h.indexOf('=')))
  if (f[0] !== '200') { f[1] = null; f[2] = null }
  return { line: [f[0], f[1], f[2], ...headers, f[f.length - 1]].join('\t'), names }
}

async function compare (t, conf, trace, store = 'mem', create = false) {
  const policy = path.join(SRC, 'etc', conf)
  const csv = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-trace-')), 'trace.csv')
  const settleCol = trace.settle ? ',settle:' + trace.settle : ''
  fs.writeFileSync(csv, ['t_ms,method,route,' + trace.attrs.join(',') + settleCol]
    .concat(trace.lines.map((l) => l.join(','))).join('\n') + '\n')
  const want = execFileSync(process.env.SLUICE_TRACE_DECIDE, [policy, csv], { encoding: 'utf8' })
    .trimEnd().split('\n').map(cLine)
  assert.strictEqual(want.length, trace.lines.length)

  const attributes = {}
  for (const a of trace.attrs) attributes[a] = (request) => request.headers['x-' + a]
  // With a settle column: the handler's answer says what the request used
  // (x-tokens-used, from the test's x-used), the settle option reads it
  // from the reply, and each request waits for its settle to complete.
  let responded = 0
  let settles = 0
  const settle = trace.settle
    ? (request, reply) => {
        const v = reply.getHeader('x-tokens-used')
        return v === undefined ? null : { [trace.settle]: v }
      }
    : undefined
  const extra = (app) => {
    app.addHook('onSend', async (request, reply) => {
      if (request.headers['x-used'] !== undefined) reply.header('x-tokens-used', request.headers['x-used'])
    })
    app.addHook('onResponse', async (request) => {
      const s = request.sluice
      if (s && s.settling !== null) {
        assert.strictEqual(await s.settling, null)
        settles++
      }
      responded++
    })
  }
  const { app, url } = await startApp({ policy, store, create, clockMs: 0, jitter: false, headerForm: 'both', attributes, settle }, extra)
  t.after(() => app.close())
  const counts = {}
  for (let i = 0; i < trace.lines.length; i++) {
    const [ms, method, route, ...vals] = trace.lines[i]
    const headers = {}
    trace.attrs.forEach((a, j) => { if (vals[j] !== '-') headers['x-' + a] = vals[j] })
    if (trace.settle && vals[trace.attrs.length] !== '-') headers['x-used'] = vals[trace.attrs.length]
    app.sluice.setTime(ms)
    const res = await request(url, method, route, headers)
    await until(() => responded === i + 1) // its settle too
    const got = pluginLine(res, want[i].names)
    assert.strictEqual(got, want[i].line, `line ${i + 2} of the trace (${trace.lines[i].join(',')})`)
    counts[res.status] = (counts[res.status] || 0) + 1
  }
  // The trace exercises both sides of every limit: admissions, refusals.
  assert.ok(counts[200] > 20 && counts[429] > 20, JSON.stringify(counts))
  if (trace.settle) {
    assert.ok(settles > 30, `settled ${settles} of ${counts[200]} answered 200`)
    counts.settled = settles
  }
  t.diagnostic(JSON.stringify(counts))
  return counts
}

module.exports = { githubTrace, llmTrace, llmSettleTrace, compare }
