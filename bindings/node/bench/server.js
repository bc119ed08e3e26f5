'use strict'
// One Fastify server for bench.js: `node server.js VARIANT POLICY`, prints
// its port.  Variants: bare (no limiter), ratelimit (@fastify/rate-limit,
// its in-memory store), sluice (this plugin on mem, decided on the main
// thread), sluice-async (the same, decided on the thread pool), and both
// (one server, the same route twice: /rl/items behind rate-limit and
// /sluice/items behind this plugin, each in its own encapsulated context,
// so that the two are measured in one process, heap and JIT).  Both
// limiters key by the client address and never refuse here: the cost of
// an admitted request is measured.
const Fastify = require('fastify')
const [variant, policy] = process.argv.slice(2)

async function main () {
  const app = Fastify({ logger: false })
  const sluiceOpts = {
    policy, secret: Buffer.alloc(16, 3), problemBase: 'https://api.example.com/errors/',
    async: variant === 'sluice-async',
    // the plugin's default form unless SLUICE_BENCH_FORM names another
    headerForm: process.env.SLUICE_BENCH_FORM || undefined
  }
  if (variant === 'both') {
    await app.register(async (child) => {
      await child.register(require('@fastify/rate-limit'), { max: 1e9, timeWindow: 60000 })
      child.get('/rl/items', async () => ({ ok: true }))
    })
    await app.register(async (child) => {
      await child.register(require('..'), sluiceOpts)
      child.get('/sluice/items', async () => ({ ok: true }))
    })
    console.log(await app.listen({ port: 0, host: '127.0.0.1' }))
    return
  }
  if (variant === 'ratelimit') {
    await app.register(require('@fastify/rate-limit'), { max: 1e9, timeWindow: 60000 })
  } else if (variant === 'sluice' || variant === 'sluice-async') {
    await app.register(require('..'), sluiceOpts)
  } else if (variant !== 'bare') {
    throw new Error('unknown variant ' + variant)
  }
  app.get('/v1/items', async () => ({ ok: true }))
  const url = await app.listen({ port: 0, host: '127.0.0.1' })
  console.log(url)
}
main().catch((e) => { console.error(e); process.exit(1) })
