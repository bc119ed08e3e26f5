'use strict'
// `npm install` builds the addon with node-gyp against the installed
// libsluice, which pkg-config finds (sluice.pc; PKG_CONFIG_PATH for a
// prefix of your own).  Node's headers: those installed with node itself
// (PREFIX/include/node, as Debian's and NodeSource's packages put them)
// when npm was not told a nodedir, so that nothing is downloaded.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const pc = spawnSync('pkg-config', ['--modversion', 'sluice'], { encoding: 'utf8' })
if (pc.status !== 0) {
  console.error('fastify-sluice: pkg-config cannot find libsluice (sluice.pc): install ' +
    'sluice (its -dev package, or `meson install`) and set PKG_CONFIG_PATH for a prefix of your own')
  process.exit(1)
}
const args = ['rebuild']
if (!process.env.npm_config_nodedir) {
  const prefix = path.resolve(process.execPath, '..', '..')
  if (fs.existsSync(path.join(prefix, 'include', 'node', 'node_api.h'))) {
    args.push('--nodedir=' + prefix)
  }
}
// npm hands its own node-gyp to install scripts; else one installed beside.
const gyp = process.env.npm_config_node_gyp || require.resolve('node-gyp/bin/node-gyp.js')
const r = spawnSync(process.execPath, [gyp, ...args], { stdio: 'inherit' })
process.exit(r.status === null ? 1 : r.status)
