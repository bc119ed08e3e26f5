'use strict'
// The addon's JS face: a policy opened from a policy file on a store,
// deciding requests into the answer sluice's HTTP renderer makes (status,
// headers, problem+json body) and releasing leases.  Usable without
// Fastify; index.js is the Fastify plugin built on it.

const path = require('node:path')

// SLUICE_NODE_ADDON names a built addon (the meson build's, in tests);
// otherwise the one `npm install` built with node-gyp.
const addon = require(process.env.SLUICE_NODE_ADDON ||
  path.join(__dirname, '..', 'build', 'Release', 'sluice.node'))

// Stores whose decision is a memory access in this process: decided on the
// main thread (cheaper than a hop to the thread pool).  Any other store
// (lmdb's disk, Redis's round trip) is decided on the thread pool so the
// event loop never waits for it.
const IN_PROCESS = /^(mem|shm)(:|$)/

const FORMS = { legacy: 0, sf: 1, both: 2 }

class Sluice {
  // opts: policy (file, required), store ('mem', 'shm:name=/x',
  // 'lmdb:path=/dir', 'redis:nodes=host:port'), secret (16 bytes: a Buffer
  // or 32 hex digits, the same in every process sharing the store),
  // problemBase (URI the problem types hang off), headerForm ('legacy',
  // 'sf' or 'both'), jitter (false: no random Retry-After addition),
  // async (true / false: force where decisions run), clockMs (a manual
  // clock starting there, moved with setTime: replaying traces).
  constructor (opts) {
    if (opts == null || typeof opts !== 'object') {
      throw new TypeError('sluice: new Sluice(options)')
    }
    const o = { ...opts }
    if (typeof o.secret === 'string') {
      if (!/^[0-9a-fA-F]{32}$/.test(o.secret)) {
        throw new TypeError('sluice: secret must be 32 hex digits or a Buffer of 16 bytes')
      }
      o.secret = Buffer.from(o.secret, 'hex')
    }
    if (typeof o.headerForm === 'string') {
      if (!(o.headerForm in FORMS)) {
        throw new TypeError("sluice: headerForm is 'legacy', 'sf' or 'both'")
      }
      o.headerForm = FORMS[o.headerForm]
    }
    if (o.jitter !== undefined) o.jitter = o.jitter ? 1 : 0
    this.store = o.store || 'mem'
    this.async = typeof opts.async === 'boolean' ? opts.async : !IN_PROCESS.test(this.store)
    this._h = addon.open(o)
  }

  // { method, route, tenant, key, tier, ip, cost, attrs: { name: value } }
  // into the flat array the addon reads.  Attributes whose value is
  // undefined or null are left out (absent, as the policy sees it).
  static flatten (req) {
    const q = [req.method, req.route, req.tenant, req.key, req.tier, req.ip, req.cost]
    const a = req.attrs
    if (a) {
      for (const name in a) {
        const v = a[name]
        if (v !== undefined && v !== null) q.push(name, v)
      }
    }
    return q
  }

  // The decision now, on this thread.  A result: { allowed, status,
  // outcome, limit, unit, remaining, retryAfterMs, cost, leaseId (BigInt,
  // 0n: none), headers, body (problem+json or null), error (null, or
  // 'SLUICE_ENOTFOUND'... with field naming the request field at fault) }.
  decideSync (req) { return addon.decide(this._h, Sluice.flatten(req)) }

  // The same, the store call on the thread pool: a Promise.
  decideAsync (req) { return addon.decideAsync(this._h, Sluice.flatten(req)) }

  // Where this handle's store is best decided (see IN_PROCESS): a result,
  // or a Promise of one.
  decide (req) {
    const q = Sluice.flatten(req)
    return this.async ? addon.decideAsync(this._h, q) : addon.decide(this._h, q)
  }

  // Free the leases of a decision (the same request).  Resolves to null,
  // or the error's name ('SLUICE_ENOTFOUND': it had expired).
  release (req, leaseId) {
    const q = Sluice.flatten(req)
    return this.async
      ? addon.releaseAsync(this._h, q, leaseId)
      : Promise.resolve(addon.release(this._h, q, leaseId))
  }

  setTime (ms) { addon.setTime(this._h, ms) }

  // Decisions in flight complete first; then the policy and its store
  // close.  A second close does nothing.
  close () { addon.close(this._h) }
}

Sluice.version = addon.version

module.exports = { Sluice }
