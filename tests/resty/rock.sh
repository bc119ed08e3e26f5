#!/usr/bin/env bash
# The rockspec, with Debian's luarocks: `luarocks lint`, then `luarocks
# make` into a scratch tree, and what it installed is what the tests load:
# every module of the binding's folder, loadable from that tree alone,
# with the version the rockspec, resty.sluice._VERSION and the project
# (meson) agree on.
#
#   rock.sh BINDING_DIR PROJECT_VERSION LIBSLUICE
set -euo pipefail
dir=$1 version=$2 lib=$3
command -v luarocks >/dev/null || { echo "SKIP: luarocks is not installed"; exit 77; }
command -v luajit >/dev/null || { echo "SKIP: luajit is not installed"; exit 77; }
spec=$(cd "$dir" && ls lua-resty-sluice-*.rockspec)
[ "$(echo "$spec" | wc -l)" = 1 ] || { echo "rock: one rockspec expected, found: $spec"; exit 1; }
[ "$spec" = "lua-resty-sluice-$version-1.rockspec" ] ||
  { echo "rock: $spec is not version $version (meson.build)"; exit 1; }
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
(cd "$dir" && luarocks lint "$spec")
(cd "$dir" && luarocks make --tree "$tree" "$spec") >"$tree.log" 2>&1 ||
  { cat "$tree.log"; rm -f "$tree.log"; exit 1; }
rm -f "$tree.log"
# Every .lua file of the binding is installed, at the path of its module.
missing=0
while read -r f; do
  rel=${f#"$dir"/}
  rel=${rel#lib/}
  [ -f "$tree/share/lua/5.1/$rel" ] || { echo "rock: $f is not installed"; missing=1; }
done < <(find "$dir" -name '*.lua')
[ "$missing" = 0 ]
# Loaded from the tree alone (not the source folder).
got=$(cd / && LUA_PATH="$tree/share/lua/5.1/?.lua" luajit -e '
  package.preload["kong.db.schema.typedefs"] = function() return {} end
  local s = require "resty.sluice"
  local h = require "kong.plugins.sluice.handler"
  require "kong.plugins.sluice.schema"
  assert(package.searchpath("resty.sluice", package.path):find("'"$tree"'", 1, true))
  local lim, err = s.new{ library = "'"$lib"'", policy = "/nonexistent", store = "mem",
                          secret = "00112233445566778899aabbccddeeff" }
  assert(not lim and err:find("SLUICE_EIO", 1, true), err)
  io.write(s._VERSION, " ", h.VERSION)')
[ "$got" = "$version $version" ] || { echo "rock: versions '$got', want $version"; exit 1; }
echo "rock: $spec lints, installs its $(find "$dir" -name '*.lua' | wc -l) modules, loads as $version"
