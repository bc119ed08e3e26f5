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

// An answer from the addon is numbers in a Float64Array, in these slots
// (src/addon.h's SN_OUT_*), and one string: the header values, one a
// line, then the body.  Names (header names, limit names, outcomes,
// errors) come as ids, whose text the handle's table gives once.
const STATUS = 0; const ALLOWED = 1; const OUTCOME = 2; const LIMIT = 3
const UNIT = 4; const REMAINING = 5; const RETRY_MS = 6; const COST = 7
const FLAGS = 8; const LEASE_LO = 9; const LEASE_HI = 10; const ERROR = 11
const FIELD = 12; const MESSAGE = 13; const NHEADERS = 14; const HAS_BODY = 15
const CHECK_LO = 16; const CHECK_HI = 17; const NOW_LO = 18; const NOW_HI = 19
const HEADERS = 20

// The result object: { allowed, status, outcome, limit, unit, remaining,
// retryAfterMs, cost, flags, leaseId (BigInt, 0n: none), headers (names
// in lower case), body (problem+json or null), error (null, or
// 'SLUICE_ENOTFOUND'... with field naming the request field at fault, and
// message), settle (null: nothing to settle; else what settle() needs of
// the decision, as the addon gave it) }.
function nameOf (s, id) {
  return id < 0 ? null : (s._names[id] ?? s._name(id))
}

function result (s, o, text) {
  if (o[ERROR] >= 0) {
    return {
      allowed: false, status: 0, outcome: null, limit: null, unit: null, remaining: 0,
      retryAfterMs: 0, cost: 0, flags: 0, leaseId: 0n, headers: {}, body: null,
      error: nameOf(s, o[ERROR]), field: nameOf(s, o[FIELD]), message: nameOf(s, o[MESSAGE]),
      settle: null
    }
  }
  const headers = {}
  const n = o[NHEADERS]
  let at = 0
  for (let i = 0; i < n; i++) {
    const nl = text.indexOf('\n', at)
    const id = o[HEADERS + i]
    headers[s._lower[id] ?? s._lowerName(id)] = text.slice(at, nl)
    at = nl + 1
  }
  const lo = o[LEASE_LO]
  const hi = o[LEASE_HI]
  return {
    allowed: o[ALLOWED] === 1,
    status: o[STATUS],
    outcome: nameOf(s, o[OUTCOME]),
    limit: nameOf(s, o[LIMIT]),
    unit: nameOf(s, o[UNIT]),
    remaining: o[REMAINING],
    retryAfterMs: o[RETRY_MS],
    cost: o[COST],
    flags: o[FLAGS],
    leaseId: lo === 0 && hi === 0 ? 0n : (BigInt(hi) << 32n) | BigInt(lo),
    headers,
    body: o[HAS_BODY] === 1 ? text.slice(at) : null,
    error: null,
    field: null,
    message: null,
    settle: o[CHECK_LO] === 0 && o[CHECK_HI] === 0
      ? null
      : [o[CHECK_LO], o[CHECK_HI], o[NOW_LO], o[NOW_HI]]
  }
}

class Sluice {
  // opts: policy (file, required), store ('mem', 'shm:name=/x',
  // 'lmdb:path=/dir', 'redis:nodes=host:port'), secret (16 bytes: a Buffer
  // or 32 hex digits, the same in every process sharing the store),
  // problemBase (URI the problem types hang off), headerForm ('legacy',
  // 'sf' or 'both'), jitter (false: no random Retry-After addition),
  // async (true / false: force where decisions run), create (true: make
  // a shm segment or an lmdb environment that is missing), clockMs (a manual
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
    if (o.create !== undefined) o.create = o.create ? 1 : 0
    this.store = o.store || 'mem'
    this.async = typeof opts.async === 'boolean' ? opts.async : !IN_PROCESS.test(this.store)
    this._h = addon.open(o)
    this._out = addon.out(this._h)
    this._names = []
    this._lower = []
  }

  _name (id) {
    const t = addon.str(this._h, id)
    this._names[id] = t
    return t
  }

  // A header name in lower case, as Node gives them (res.getHeaders(),
  // message.headers) and Fastify stores them: made once, so that setting
  // it costs no new string per request.
  _lowerName (id) {
    const t = (this._names[id] ?? this._name(id)).toLowerCase()
    this._lower[id] = t
    return t
  }

  // { method, route, tenant, key, tier, ip, attrs: { name: value } }
  // into the one string the addon reads (src/request.c): the fields
  // joined by NUL bytes, an absent one empty.  Attributes whose value is
  // undefined or null are left out (absent, as the policy sees it).
  // Returns the field count; the string is in this._q.
  _join (req) {
    // The built-in endpoint classes' fields are gone: refused, never read
    // as something else (a request would silently cost what its route says).
    if (req.cost !== undefined || req.class !== undefined) {
      throw new TypeError(`sluice: request.${req.cost !== undefined ? 'cost' : 'class'} is not read: ` +
        "a request is its method, route and attrs, a cost an attribute its route's cost reads")
    }
    let q = (req.method ?? '') + '\0' + (req.route ?? '') + '\0' + (req.tenant ?? '') + '\0' +
      (req.key ?? '') + '\0' + (req.tier ?? '') + '\0' + (req.ip ?? '')
    let n = 6
    const a = req.attrs
    if (a) {
      for (const name in a) {
        const v = a[name]
        if (v !== undefined && v !== null) {
          q += '\0' + name + '\0' + v
          n += 2
        }
      }
    }
    this._q = q
    return n
  }

  // The decision now, on this thread (a result: see result() above).
  decideSync (req) {
    const n = this._join(req)
    const text = addon.decide(this._h, this._q, n)
    return result(this, this._out, text)
  }

  // The same, the store call on the thread pool: a Promise.
  decideAsync (req) {
    const n = this._join(req)
    return addon.decideAsync(this._h, this._q, n).then((r) => {
      if (r[2] !== undefined) this._names = r[2] // closed meanwhile: every name
      return result(this, r[0], r[1])
    })
  }

  // Where this handle's store is best decided (see IN_PROCESS): a result,
  // or a Promise of one.
  decide (req) {
    return this.async ? this.decideAsync(req) : this.decideSync(req)
  }

  // Free the leases of a decision (the same request).  Resolves to null,
  // or the error's name ('SLUICE_ENOTFOUND': it had expired).
  // A bad argument or a closed handle rejects (never throws: a release
  // runs from event listeners).
  release (req, leaseId) {
    try {
      const n = this._join(req)
      return this.async
        ? addon.releaseAsync(this._h, this._q, n, leaseId)
        : Promise.resolve(addon.release(this._h, this._q, n, leaseId))
    } catch (e) {
      return Promise.reject(e)
    }
  }

  // Settle a decision's real cost once the response is known
  // (docs/policy.md "Settling a request's real cost"): req and decision
  // as decided, actual the attributes the route's costs read, with their
  // real values ({ tokens: 1234 }).  Resolves to null (decision.flags
  // then has the settled flag), or the error's name: 'SLUICE_ENOTFOUND'
  // (nothing to settle), 'SLUICE_EEXIST' (settled already), an input
  // error, a store error (it may or may not have applied).  On the
  // thread pool where decisions are; never throws (rejects on a bad
  // argument or a closed handle).
  settle (req, decision, actual) {
    try {
      const s = decision.settle
      if (s === null) return Promise.resolve('SLUICE_ENOTFOUND')
      // the report: a request of attributes only, as the addon reads it
      const na = this._join({ attrs: actual })
      const a = this._q
      const n = this._join(req)
      const args = [this._h, this._q, n, a, na, decision.flags, s[0], s[1], s[2], s[3]]
      const mark = (err) => {
        if (err === null) decision.flags |= addon.SETTLED
        return err
      }
      return this.async
        ? addon.settleAsync(...args).then(mark)
        : Promise.resolve(mark(addon.settle(...args)))
    } catch (e) {
      return Promise.reject(e)
    }
  }

  // Decide req again with more attributes, what its response said
  // ({ result: '401' }), which a route's reported strikes count
  // (docs/policy.md "Declared penalties"); req is left as it is.
  // Resolves to the report's result (its decision, or its input error in
  // error); rejects on a bad argument or a closed handle.
  report (req, said) {
    try {
      return Promise.resolve(this.decide({ ...req, attrs: { ...req.attrs, ...said } }))
    } catch (e) {
      return Promise.reject(e)
    }
  }

  setTime (ms) { addon.setTime(this._h, ms) }

  // Decisions in flight complete first; then the policy and its store
  // close.  A second close does nothing.
  close () { addon.close(this._h) }
}

Sluice.version = addon.version

module.exports = { Sluice }
