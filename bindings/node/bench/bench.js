'use strict'
// The Node target of issue 36: a Fastify route with fastify-sluice on mem
// against the same route with @fastify/rate-limit's in-memory store, in
// requests/s under wrk, on the same machine.  Each variant is its own
// server process; rounds interleave them (the order rotates each round) so
// that the machine's load falls on all alike; the median of the rounds is
// reported, and the ratio sluice / rate-limit (target >= 0.9), also
// measured with both servers driven at once (wrkPair).  Also the
// bare route (no limiter) and sluice deciding on the thread pool instead
// of the main thread (what an in-process store would pay for the hop).
//   node bench.js [ROUNDS] [SECONDS]      (needs wrk)
const { spawn, execFile, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const rounds = Number(process.argv[2] || 7)
const seconds = Number(process.argv[3] || 1)
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

// Two servers driven at once, each by its own wrk: whatever else the
// machine runs weighs on both alike at every moment (with two cores, each
// server process gets its share), so the ratio of their rates is their
// cost ratio even where the load moves from one second to the next.
function wrkPair (a, b, secs) {
  const one = (server) => new Promise((resolve, reject) => {
    execFile('wrk', ['-t1', '-c32', `-d${secs}s`, server.url + '/v1/items'], (err, out) => {
      const m = /Requests\/sec:\s+([0-9.]+)/.exec(out || '')
      if (err || !m || /Non-2xx/.test(out)) reject(err || new Error('wrk: ' + out))
      else resolve(Number(m[1]))
    })
  })
  return Promise.all([one(a), one(b)])
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] }

async function main () {
  try { execFileSync('wrk', ['--version'], { stdio: 'ignore' }) } catch (e) {
    if (e.code === 'ENOENT') { console.log('wrk not found: skipped'); process.exit(77) }
  }
  const servers = {}
  try {
    for (const v of variants) servers[v] = await start(v)
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
    // The target's ratio, measured side by side (wrkPair), with rate-limit
    // against the bare route as the same measure's calibration.
    const pairs = { sluice: [], bare: [] }
    for (let r = 0; r < rounds; r++) {
      const [s, l] = await wrkPair(servers.sluice, servers.ratelimit, 2 * seconds)
      pairs.sluice.push(s / l)
      const [b, l2] = await wrkPair(servers.bare, servers.ratelimit, 2 * seconds)
      pairs.bare.push(b / l2)
    }
    console.log(`side by side, ${rounds} rounds of ${2 * seconds} s: sluice / rate-limit ` +
      `${median(pairs.sluice).toFixed(2)}x (target >= 0.9x; rounds: ${pairs.sluice.map((x) => x.toFixed(2)).join(' ')}); ` +
      `bare / rate-limit ${median(pairs.bare).toFixed(2)}x`)
  } finally { // every server started, also when one failed to
    for (const v of variants) if (servers[v]) servers[v].p.kill()
  }
}
main().catch((e) => { console.error(e); process.exit(1) })
