'use strict'
// The same trace through the Fastify plugin over real HTTP and through the
// C library (trace_decide.c): every answer the same, status, headers and
// body.  Both decide on mem at the trace's time (a manual clock), without
// Retry-After jitter, in the 'both' header form.
const test = require('node:test')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const assert = require('node:assert')
const { agent } = require('./helpers')
const { githubTrace, llmTrace, llmSettleTrace, compare } = require('./traces')

test('GitHub policy: the plugin answers as the C library', async (t) => {
  const counts = await compare(t, 'github.conf', githubTrace(700))
  assert.ok(counts[400] > 0, 'a request without its user is an input error')
})

test('LLM gateway policy: the plugin answers as the C library', async (t) => {
  await compare(t, 'llm-gateway.conf', llmTrace(500))
})

// Settling each response's real tokens (the plugin's settle option, from
// a reply header) moves the later decisions exactly as the C library's
// sluice_policy_settle() on the same trace: on mem (the main thread) and
// lmdb (the thread pool).
test('LLM gateway policy with settles: later answers as the C library\'s', async (t) => {
  await compare(t, 'llm-gateway.conf', llmSettleTrace(500))
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-lmdb-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  await compare(t, 'llm-gateway.conf', llmSettleTrace(300), `lmdb:path=${dir}`, true)
})

// The other stores answer as mem does: shm (decided on the main thread),
// lmdb (on the thread pool, through decideAsync).
test('LLM gateway policy on shm and on lmdb: the same answers', async (t) => {
  const name = `/sluice-node-${process.pid}`
  t.after(() => fs.rmSync('/dev/shm' + name, { force: true }))
  await compare(t, 'llm-gateway.conf', llmTrace(300), `shm:name=${name};capacity=4096`, true)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-lmdb-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  await compare(t, 'llm-gateway.conf', llmTrace(300), `lmdb:path=${dir}`, true)
})

test.after(() => agent.destroy())
