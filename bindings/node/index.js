'use strict'
// fastify-sluice: a Fastify plugin deciding every request through a sluice
// policy file (limits, scopes and costs as data; docs/node.md).
//
//   fastify.register(require('fastify-sluice'), {
//     policy: '/etc/sluice/github.conf', store: 'mem', secret,
//     problemBase: 'https://api.example.com/errors/',
//     attributes: { user: (request) => request.headers['x-user'] },
//   })
//
// The hook (onRequest, or preHandler when an attribute needs the parsed
// body) describes the request (method, path, the attributes from the
// user's functions), decides it, and either answers the refusal (429,
// 409, 503... with sluice's headers and problem+json body) or sets the
// RateLimit headers and lets the handler run.  A decision that took
// leases (a concurrency or lock limit) gives them back once the response
// is over, when its raw response closes: after the answer went out (a
// thrown handler's 500 too), or when the connection closed before that.
// That is where Fastify's onResponse runs, and where it does not (a
// connection closed first); and an onResponse hook would cost every
// request Fastify's response listeners, where this costs only the
// requests that hold leases.
//
// settle: (request, reply) => ({ tokens: ... }) reports a request's real
// cost once its response has gone (an onResponse hook, added only with
// the option): the attributes its route's costs read, with the values the
// handler or the upstream gave (a reply header, a field it kept), or
// null / undefined to leave the charge as it is.  Each admitted decision
// that charged a cost is settled once (sluice's settle: a charge or a
// refund of the difference, docs/policy.md); request.sluice.settling is
// then a Promise of null or the error's name, which never rejects.  A
// settle that fails (a store down) is logged and never fails the request.
//
// report: (request, reply) => ({ result: String(reply.statusCode) })
// reports what an admitted request's response said (an onResponse hook,
// added only with the option): the request is decided again with these
// attributes beside its own, which a route's reported strikes count (a
// sign-in's failures, 401s and 403s); null / undefined reports nothing.
// request.sluice.reporting is then a Promise of null or the error's name.

const fp = require('fastify-plugin')
const { Sluice } = require('./lib/sluice')

function pathOf (url) {
  const q = url.indexOf('?')
  return q < 0 ? url : url.slice(0, q)
}

function inputError (r) {
  const e = new Error(`sluice: request ${r.field || 'field'}: ${r.message}`)
  e.statusCode = 400
  e.code = r.error
  return e
}

function sluicePlugin (fastify, opts, next) {
  let sluice
  try {
    sluice = opts.sluice || new Sluice(opts)
  } catch (e) {
    return next(e)
  }
  const owned = !opts.sluice
  const hook = opts.hook || 'onRequest'
  if (hook !== 'onRequest' && hook !== 'preHandler') {
    return next(new TypeError("fastify-sluice: hook is 'onRequest' or 'preHandler'"))
  }
  const attrs = Object.entries(opts.attributes || {})
  for (const [name, fn] of attrs) {
    if (typeof fn !== 'function') {
      return next(new TypeError(`fastify-sluice: attributes.${name} must be a function of the request`))
    }
  }
  // The built-in scope attributes (tenant, key, tier, ip): a policy whose
  // scopes name them (etc/ledger.conf's tenant and key buckets) needs
  // them; the rest are attributes.
  const common = opts.request || null
  const routeOf = opts.route || ((request) => pathOf(request.url))
  const passUnmatched = (opts.unmatched || 'pass') === 'pass'
  const settleOf = opts.settle || null
  const reportOf = opts.report || null
  for (const [name, fn] of [['settle', settleOf], ['report', reportOf]]) {
    if (fn !== null && typeof fn !== 'function') {
      return next(new TypeError(`fastify-sluice: ${name} must be a function of (request, reply)`))
    }
  }

  function describe (request) {
    const c = common ? common(request) : null
    if (c && c.cost !== undefined) {
      throw new TypeError("fastify-sluice: request() gave a cost: a cost is an attribute its route's cost reads")
    }
    let a
    if (attrs.length) {
      a = {}
      for (let i = 0; i < attrs.length; i++) a[attrs[i][0]] = attrs[i][1](request)
    }
    return {
      method: request.method,
      route: routeOf(request),
      tenant: c ? c.tenant : undefined,
      key: c ? c.key : undefined,
      tier: c ? c.tier : undefined,
      ip: c && c.ip !== undefined ? c.ip : request.ip,
      attrs: a
    }
  }

  function answer (request, reply, q, r, done) {
    if (r.error !== null) {
      if (passUnmatched && r.error === 'SLUICE_ENOTFOUND' && r.field === 'route') return done()
      return done(inputError(r))
    }
    // releasing: once the leases are being given back, a Promise of null
    // (or the error's name)
    request.sluice = {
      request: q, decision: r, released: false, releasing: null, settling: null, reporting: null
    }
    const h = r.headers
    for (const name in h) reply.header(name, h[name])
    if (!r.allowed) {
      // a Buffer: Fastify sends it with the renderer's Content-Type as it is
      reply.code(r.status).send(Buffer.from(r.body))
      return
    }
    if (r.leaseId !== 0n) reply.raw.once('close', () => release(request))
    done()
  }

  function decideHook (request, reply, done) {
    let q
    try {
      q = describe(request)
    } catch (e) {
      return done(e)
    }
    let r
    try {
      if (sluice.async) {
        sluice.decideAsync(q).then((r) => answer(request, reply, q, r, done)).catch(done)
        return
      }
      r = sluice.decideSync(q)
    } catch (e) { // a closed handle, an attribute that is no string or number
      return done(e)
    }
    answer(request, reply, q, r, done)
  }

  function release (request) {
    const s = request.sluice
    if (s === null || s.released || s.decision.leaseId === 0n) return
    s.released = true
    // resolves to null, or the error's name (never rejects)
    s.releasing = sluice.release(s.request, s.decision.leaseId).then((err) => {
      if (err !== null && err !== 'SLUICE_ENOTFOUND') {
        request.log.warn({ sluice: err }, 'sluice: a lease was not released')
      }
      return err
    }, (e) => {
      request.log.warn({ err: e }, 'sluice: a lease was not released')
      return e.code || 'SLUICE_EINVAL'
    })
  }

  function settleHook (request, reply, done) {
    const s = request.sluice
    if (s === null || s.decision.settle === null || s.settling !== null) return done()
    let actual
    try {
      actual = settleOf(request, reply)
    } catch (e) {
      request.log.warn({ err: e }, 'sluice: settle option threw')
      return done()
    }
    if (actual === null || actual === undefined) return done()
    s.settling = sluice.settle(s.request, s.decision, actual).then((err) => {
      if (err !== null) request.log.warn({ sluice: err }, 'sluice: a cost was not settled')
      return err
    }, (e) => {
      request.log.warn({ err: e }, 'sluice: a cost was not settled')
      return e.code || 'SLUICE_EINVAL'
    })
    done() // the settle goes on after the response, holding nothing
  }

  function reportHook (request, reply, done) {
    const s = request.sluice
    if (s === null || !s.decision.allowed || s.reporting !== null) return done()
    let said
    try {
      said = reportOf(request, reply)
    } catch (e) {
      request.log.warn({ err: e }, 'sluice: report option threw')
      return done()
    }
    if (said === null || said === undefined) return done()
    s.reporting = sluice.report(s.request, said).then((r) => {
      if (r.error !== null) request.log.warn({ sluice: r.error, field: r.field }, 'sluice: a report was refused')
      return r.error
    }, (e) => {
      request.log.warn({ err: e }, 'sluice: a report was refused')
      return e.code || 'SLUICE_EINVAL'
    })
    done() // the report goes on after the response, holding nothing
  }

  fastify.decorate('sluice', sluice)
  fastify.decorateRequest('sluice', null)
  fastify.addHook(hook, decideHook)
  if (settleOf !== null) fastify.addHook('onResponse', settleHook)
  if (reportOf !== null) fastify.addHook('onResponse', reportHook)
  if (owned) fastify.addHook('onClose', (instance, done) => { sluice.close(); done() })
  next()
}

module.exports = fp(sluicePlugin, { fastify: '5.x', name: 'fastify-sluice' })
module.exports.default = module.exports
module.exports.fastifySluice = module.exports
module.exports.Sluice = Sluice
