'use strict'
// What the Node suites share: a Fastify app with the plugin on a policy,
// listening on 127.0.0.1, and plain HTTP requests to it.
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const http = require('node:http')
const Fastify = require('fastify')
const sluicePlugin = require('..')

const SRC = process.env.SLUICE_SRC || path.join(__dirname, '..', '..', '..')
const SECRET = Buffer.alloc(16, 7) // trace_decide.c's
const BASE = 'https://api.example.com/errors/'

function writePolicy (text) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-node-'))
  const file = path.join(dir, 'policy.conf')
  fs.writeFileSync(file, text)
  return file
}

// An app whose every route echoes what sluice decided; extra(app) adds
// routes.  Returns { app, url }.
async function startApp (pluginOpts, extra) {
  const app = Fastify({ logger: false })
  await app.register(sluicePlugin, { secret: SECRET, problemBase: BASE, ...pluginOpts })
  app.all('/*', async (request) => {
    const d = request.sluice && request.sluice.decision
    return { limit: d ? d.limit : null, remaining: d ? d.remaining : null }
  })
  if (extra) extra(app)
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, url }
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })

// One request: { status, headers, body }.
function request (url, method, pathName, headers) {
  return new Promise((resolve, reject) => {
    const req = http.request(url + pathName, { method, headers, agent }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => { body += c })
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

// Wait for cond(), something the server side makes true, turn by turn of
// the event loop; a bounded wait, so that a broken release fails the test
// instead of hanging it.
async function until (cond) {
  for (let turns = 0; !cond(); turns++) {
    if (turns === 1000000) throw new Error('until: never happened: ' + cond)
    await new Promise((resolve) => setImmediate(resolve))
  }
}

module.exports = { until, SRC, SECRET, BASE, writePolicy, startApp, request, agent }
