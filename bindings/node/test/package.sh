#!/usr/bin/env bash
# The npm package as a user gets it: `npm pack` here, this tree installed
# with `meson install` (into a scratch root: pkg-config's sysroot points
# sluice.pc there), then the tarball installed into a new project, whose
# install builds the addon with node-gyp against that libsluice; a
# decision and a Fastify answer from it.  Exits 77 only without node.
set -euo pipefail
command -v node >/dev/null && command -v npm >/dev/null || { echo "node/npm not found: skipped"; exit 77; }
tmp=$(mktemp -d /tmp/sluice-npm-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$SLUICE_BUILD" --no-rebuild --quiet --destdir "$tmp/root" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; exit 1; }
pc=$(find "$tmp/root" -name sluice.pc -path '*pkgconfig*' | head -n 1)
[ -n "$pc" ] || { echo "meson install put no sluice.pc"; exit 1; }
export PKG_CONFIG_SYSROOT_DIR=$tmp/root PKG_CONFIG_PATH=${pc%/*}
cd "$SLUICE_SRC/bindings/node"
tarball=$(npm pack --silent --pack-destination "$tmp")
files=$(tar tzf "$tmp/$tarball")
echo "packed $tarball:" $files
# the package carries its sources, not a build or the tests
grep -qx 'package/src/addon.c' <<<"$files"
grep -qx 'package/binding.gyp' <<<"$files"
if grep -e '/build/' -e '/test/' -e node_modules <<<"$files"; then
  echo "the package carries files it should not"; exit 1
fi
mkdir "$tmp/app"
cd "$tmp/app"
npm init -y >/dev/null
# the packages come from npm's cache when `npm ci` has filled it
npm install --prefer-offline --no-audit --no-fund "$tmp/$tarball" fastify@5 >"$tmp/npm.log" 2>&1 ||
  { cat "$tmp/npm.log"; exit 1; }
test -f node_modules/fastify-sluice/build/Release/sluice.node
# the addon links the installed libsluice, not this build's
libs=$(ldd node_modules/fastify-sluice/build/Release/sluice.node)
grep -q "$tmp/root.*libsluice" <<<"$libs"
# a sanitizer build's libsluice needs its runtimes loaded first
. "$SLUICE_SRC/bindings/node/test/sanitizers.sh"
sluice_sanitizers "$(grep -o '/[^ ]*libsluice[^ ]*' <<<"$libs" | head -n 1)"
cp "$SLUICE_SRC/etc/github.conf" policy.conf
cat > try.js <<'JS'
const Fastify = require('fastify')
const sluice = require('fastify-sluice')
const { Sluice } = sluice
const secret = Buffer.alloc(16, 1)
const s = new Sluice({ policy: 'policy.conf', secret, problemBase: 'https://x.example/e/' })
const r = s.decideSync({ method: 'POST', route: '/gists', attrs: { user: 'ann' } })
if (r.status !== 200 || r.limit === null) throw new Error('decision: ' + JSON.stringify(r))
s.close()
const app = Fastify()
app.register(sluice, { policy: 'policy.conf', secret, problemBase: 'https://x.example/e/',
  attributes: { user: (q) => q.headers['x-user'] } })
app.get('/users/:u', async () => 'ok')
app.ready().then(async () => {
  const res = await app.inject({ url: '/users/x', headers: { 'x-user': 'ann' } })
  if (res.statusCode !== 200 || res.headers['ratelimit-limit'] === undefined) {
    throw new Error('answer: ' + res.statusCode + ' ' + JSON.stringify(res.headers))
  }
  console.log('installed package decides: ' + r.status + ' ' + r.limit + ', ratelimit-limit ' +
    res.headers['ratelimit-limit'] + ' (libsluice ' + Sluice.version + ')')
  await app.close()
})
JS
node try.js
