'use strict'
// The Node target of issue 36: a Fastify route with fastify-sluice on mem
// against the same route with @fastify/rate-limit's in-memory store, in
// requests/s under wrk, on the same machine.  Each variant is its own
// server process; rounds interleave them (the order rotates each round) so
// that the machine's load falls on all alike; the median of the rounds is
// reported.  Also the bare route (no limiter) and sluice deciding on the
// thread pool instead of the main thread (what an in-process store would
// pay for the hop).  The target itself (sluice / rate-limit >= 0.9x) is
// decided in one server holding both routes (decide()), in as many rounds
// as its verdict needs, up to MAX_ROUNDS.
//   node bench.js [ROUNDS] [SECONDS] [MAX_ROUNDS]      (needs wrk)
// SLUICE_BENCH_FORM=legacy (or both) gives fastify-sluice that header form
// instead of its default.
const { spawn, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const rounds = Number(process.argv[2] || 7)
const seconds = Number(process.argv[3] || 1)
const maxRounds = Number(process.argv[4] || 41)
const variants = ['bare', 'ratelimit', 'sluice', 'sluice-async']

const policy = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'sluice-bench-')), 'bench.conf')
// One GCRA limit per client address, never reached: rate-limit's default.
fs.writeFileSync(policy, `
limits = {
  per_ip = { algorithm = "gcra"; scope = [ "ip" ]; rate = 1000000; period_ms = 1000;
             burst = 1000000; unit = "requests"; };
};
routes = ( { method = "*"; route = "/*"; limits = ( "per_ip" ); } );
`)

function start (variant) {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [path.join(__dirname, 'server.js'), variant, policy],
      { stdio: ['ignore', 'pipe', 'inherit'] })
    p.stdout.setEncoding('utf8')
    p.stdout.once('data', (url) => resolve({ p, url: url.trim() }))
    p.once('exit', (code) => reject(new Error(`${variant} exited ${code}`)))
  })
}

// The server's CPU time so far (user + system, all its threads), in s.
function cpu (pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
  return (Number(f[11]) + Number(f[12])) / 100 // utime, stime: USER_HZ ticks
}

// One run: requests/s, and the server's CPU time per request (us), which
// the other sessions' load on this machine moves far less than the rate.
function wrk (server, secs) {
  const c0 = cpu(server.p.pid)
  const out = execFileSync('wrk', ['-t1', '-c32', `-d${secs}s`, server.url + '/v1/items'], { encoding: 'utf8' })
  const c1 = cpu(server.p.pid)
  const m = /Requests\/sec:\s+([0-9.]+)/.exec(out)
  const n = /([0-9]+) requests in/.exec(out)
  if (!m || !n || /Non-2xx/.test(out)) throw new Error('wrk: ' + out)
  return { rps: Number(m[1]), us: (c1 - c0) * 1e6 / Number(n[1]) }
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }

// A 95% confidence interval of the median of xs, free of any assumption on
// their distribution: the order statistics k and n + 1 - k such that fewer
// than k of n draws fall below the true median with probability <= 2.5%.
function medianInterval (xs) {
  const s = [...xs].sort((a, b) => a - b)
  const n = s.length
  let k = 0
  let p = 0 // P(Binomial(n, 1/2) <= k - 1)
  let c = 1 // n choose k
  while (k < n / 2) {
    const next = p + c / 2 ** n
    if (next > 0.025) break
    p = next
    c = c * (n - k) / (k + 1)
    k++
  }
  if (k === 0) return [-Infinity, Infinity]
  return [s[k - 1], s[n - k]]
}

// The target decided: one server with both routes (server.js's `both`),
// wrk on each in turn, the order rotating; a round's ratio is sluice's
// requests per CPU second of the server over rate-limit's (CPU time, not
// the rate: the machine's other load moves the rate by a factor of several
// between seconds, the CPU a request costs far less).  Rounds go on until
// the median's 95% interval lies wholly on one side of the target, or
// maxRounds: then it is called undecided.
async function decide (server, secs, target, minRounds, maxRounds) {
  const run = (route) => {
    const c0 = cpu(server.p.pid)
    const out = execFileSync('wrk', ['-t1', '-c32', `-d${secs}s`, server.url + route], { encoding: 'utf8' })
    const c1 = cpu(server.p.pid)
    const m = /Requests\/sec:\s+([0-9.]+)/.exec(out)
    const n = /([0-9]+) requests in/.exec(out)
    if (!m || !n || /Non-2xx/.test(out)) throw new Error('wrk: ' + out)
    return { rps: Number(m[1]), us: (c1 - c0) * 1e6 / Number(n[1]) }
  }
  run('/rl/items'); run('/sluice/items') // warm up the JIT
  const cpuRatios = []
  const rpsRatios = []
  let verdict = 'undecided'
  for (let r = 0; r < maxRounds; r++) {
    const first = r % 2 === 0 ? '/rl/items' : '/sluice/items'
    const a = run(first)
    const b = run(first === '/rl/items' ? '/sluice/items' : '/rl/items')
    const [rl, sl] = first === '/rl/items' ? [a, b] : [b, a]
    cpuRatios.push(rl.us / sl.us)
    rpsRatios.push(sl.rps / rl.rps)
    if (cpuRatios.length < minRounds) continue
    const [lo, hi] = medianInterval(cpuRatios)
    if (lo >= target) { verdict = 'met'; break }
    if (hi < target) { verdict = 'not met'; break }
  }
  const [lo, hi] = medianInterval(cpuRatios)
  return { verdict, n: cpuRatios.length, cpu: median(cpuRatios), lo, hi, rps: median(rpsRatios), rpsAll: rpsRatios }
}

async function main () {
  try { execFileSync('wrk', ['--version'], { stdio: 'ignore' }) } catch (e) {
    if (e.code === 'ENOENT') { console.log('wrk not found: skipped'); process.exit(77) }
  }
  const servers = {}
  try {
    for (const v of [...variants, 'both']) servers[v] = await start(v)
    for (const v of variants) wrk(servers[v], 1) // warm up the JIT
    const rps = Object.fromEntries(variants.map((v) => [v, []]))
    const us = Object.fromEntries(variants.map((v) => [v, []]))
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < variants.length; i++) {
        const v = variants[(i + r) % variants.length]
        const got = wrk(servers[v], seconds)
        rps[v].push(got.rps)
        us[v].push(got.us)
      }
    }
    console.log(`fastify ${require('fastify/package.json').version}, @fastify/rate-limit ` +
      `${require('@fastify/rate-limit/package.json').version}, node ${process.version}; ` +
      `wrk -t1 -c32, ${rounds} interleaved rounds of ${seconds} s, medians; load average ` +
      os.loadavg().map((x) => x.toFixed(1)).join(' '))
    for (const v of variants) {
      console.log(`${v.padEnd(13)} ${median(rps[v]).toFixed(0).padStart(7)} requests/s  ` +
        `${median(us[v]).toFixed(1).padStart(6)} us CPU/request   (rounds: ${rps[v].map((x) => x.toFixed(0)).join(' ')})`)
    }
    // Ratios within a round (its variants ran back to back), then their
    // median: the machine's load moves between rounds more than within one.
    const ratio = (a, b) => median(rps[a].map((x, r) => x / rps[b][r])).toFixed(2)
    // CPU per request as requests/s a core would give: rate-limit's / sluice's.
    const cpuRatio = (a, b) => median(us[b].map((x, r) => x / us[a][r])).toFixed(2)
    console.log(`ratio sluice / rate-limit: ${ratio('sluice', 'ratelimit')}x requests/s, ` +
      `${cpuRatio('sluice', 'ratelimit')}x by CPU per request (target >= 0.9x)`)
    console.log(`ratio sluice-async / sluice: ${ratio('sluice-async', 'sluice')}x requests/s, ` +
      `${cpuRatio('sluice-async', 'sluice')}x by CPU per request ` +
      '(an in-process store decided on the thread pool instead of the main thread)')
    console.log(`ratio rate-limit / bare: ${ratio('ratelimit', 'bare')}x, sluice / bare: ${ratio('sluice', 'bare')}x requests/s`)
    const d = await decide(servers.both, seconds, 0.9, 15, maxRounds)
    console.log(`one process, both routes, ${d.n} rounds of ${seconds} s each: sluice / rate-limit ` +
      `${d.cpu.toFixed(2)}x requests per CPU second (95% interval of the median ${d.lo.toFixed(2)}-` +
      `${d.hi.toFixed(2)}), ${d.rps.toFixed(2)}x requests/s (rounds ` +
      `${Math.min(...d.rpsAll).toFixed(2)}-${Math.max(...d.rpsAll).toFixed(2)}); target >= 0.9x: ${d.verdict}`)
  } finally { // every server started, also when one failed to
    for (const v of [...variants, 'both']) if (servers[v]) servers[v].p.kill()
  }
}
main().catch((e) => { console.error(e); process.exit(1) })
