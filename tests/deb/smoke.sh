#!/usr/bin/env bash
# Run by clean_root.sh in a mount and network namespace of its own:
# installs our packages into ROOT (third-party ones are there already) and
# uses them.  Prints one line per check and "N passed, N failed".
#   smoke.sh ROOT CACHE
set -uo pipefail
root=$1 cache=$2
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
bad() { echo "FAIL: $*"; failed=$((failed + 1)); }
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 HOME=/root "$@"; }
in_root_sh() { in_root sh -ec "$1"; }

ip link set lo up
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/dev/shm"
mount --bind "$cache/archives" "$root/var/cache/apt/archives"

# What runs in the root before ours are installed (nothing, in a chroot
# whose services were held back; but count, not assume).
procs_in_root() {
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && cat "$p/comm" 2>/dev/null
  done | sort
}
before=$(procs_in_root)

if out=$(in_root_sh 'cd /tmp/debs && apt-get install -y -q --no-install-recommends ./*.deb' 2>&1); then
  ok "apt-get install ./*.deb"
else
  bad "apt-get install ./*.deb:"; echo "$out" | tail -20
fi

# Installing them started nothing and listens nowhere.
after=$(procs_in_root)
if [ "$before" = "$after" ]; then ok "no process left running by the install"
else bad "the install left processes running: $(comm -13 <(echo "$before") <(echo "$after") | xargs)"; fi
listening=$(ss -H -ltnu | awk '{print $5}' | grep -vE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):' || true)
if [ -z "$listening" ]; then ok "nothing listens beyond loopback after the install"
else bad "listening after the install: $listening"; fi
for deb in "$root"/tmp/debs/*.deb; do
  ctl=$(mktemp -d); dpkg-deb -e "$deb" "$ctl"
  starts=$(grep -lE 'invoke-rc\.d|systemctl|deb-systemd-invoke|start-stop-daemon' "$ctl"/* 2>/dev/null || true)
  units=$(dpkg-deb -c "$deb" | grep -E '/(systemd/system|init\.d)/' || true)
  rm -rf "$ctl"
  if [ -z "$starts$units" ]; then ok "$(basename "$deb"): no service, no script that starts one"
  else bad "$(basename "$deb") starts or ships a service: $starts $units"; fi
done

# The README's quickstart against the installed library and sluice.pc.
want='request 300: 429, retry after 200 ms, 0 points left'
if got=$(in_root_sh 'cd /tmp && gcc -std=c11 -o quickstart quickstart.c $(pkg-config --cflags --libs sluice) && ./quickstart' 2>&1) &&
   [ "$got" = "$want" ]; then
  ok "quickstart built with pkg-config --cflags --libs sluice prints '$want'"
else bad "quickstart: $(echo "$got" | tail -5)"; fi

# The CLI, its default policy, its man pages.
if got=$(in_root sluice simulate growth-batch 2>&1) && echo "$got" | grep -q .; then
  ok "sluice simulate growth-batch ($(echo "$got" | wc -l) lines)"
else bad "sluice simulate growth-batch: $got"; fi
if got=$(in_root sluice simulate --config /etc/sluice/sluice.conf growth-batch 2>&1) &&
   in_root sluice simulate --help | grep -q '/etc/sluice/sluice.conf'; then
  ok "sluice simulate --config /etc/sluice/sluice.conf, the path its --help names"
else bad "sluice simulate with /etc/sluice/sluice.conf: $got"; fi
# The default policy is the ledger API's file, installed as sluice.conf;
# every shipped policy is beside the others in /usr/share/sluice/policies,
# and each one loads.
if in_root cmp -s /etc/sluice/sluice.conf /usr/share/sluice/policies/ledger.conf; then
  ok "/etc/sluice/sluice.conf is the shipped ledger.conf"
else bad "/etc/sluice/sluice.conf is not /usr/share/sluice/policies/ledger.conf"; fi
if got=$(in_root_sh 'ls /usr/share/sluice/policies/*.conf | wc -l; sluice check /usr/share/sluice/policies/*.conf' 2>&1) &&
   [ "$(echo "$got" | head -1)" -ge 4 ]; then
  ok "sluice check /usr/share/sluice/policies/*.conf ($(echo "$got" | head -1) files)"
else bad "sluice check the shipped policies: $got"; fi
for page in man1/sluice.1 man1/ledger-api.1 man1/batch-client.1 man5/ngx_http_sluice_module.5; do
  if in_root_sh "zcat /usr/share/man/$page.gz | grep -q '^\.TH '"; then ok "man page $page.gz installed"
  else bad "man page $page.gz missing"; fi
done
if in_root_sh 'zcat /usr/share/man/man1/sluice.1.gz | grep -q "^\.SS sluice simulate"'; then
  ok "sluice.1 has the simulate command's help"
else bad "sluice.1 lacks the simulate command's help"; fi

# nginx, the module enabled the Debian way, its directives understood.
if [ -L "$root/etc/nginx/modules-enabled/50-mod-http-sluice.conf" ]; then
  ok "module enabled: /etc/nginx/modules-enabled/50-mod-http-sluice.conf"
else bad "no modules-enabled link: $(ls "$root/etc/nginx/modules-enabled/")"; fi
cat >"$root/etc/nginx/conf.d/sluice-smoke.conf" <<'EOF'
sluice_policy /etc/sluice/sluice.conf;
sluice_secret 0f1e2d3c4b5a69788796a5b4c3d2e1f0;
EOF
if got=$(in_root nginx -t 2>&1); then ok "nginx -t with sluice_policy /etc/sluice/sluice.conf"
else bad "nginx -t: $got"; fi
rm "$root/etc/nginx/conf.d/sluice-smoke.conf"

# Redis with the module from /usr/lib/redis/modules, on 127.0.0.1.
mod=/usr/lib/redis/modules/sluice_redis.so
in_root redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
  --daemonize no --loadmodule "$mod" >"$root/tmp/redis.log" 2>&1 &
rpid=$!
up=no
for _ in $(seq 1 300); do
  in_root redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && { up=yes; break; }
  kill -0 $rpid 2>/dev/null || break
  sleep 0.1
done
if [ $up = yes ] && in_root redis-cli -h 127.0.0.1 MODULE LIST | grep -qx sluice; then
  ok "redis-server --loadmodule $mod: MODULE LIST names sluice"
else bad "redis-server with $mod (up: $up): $(tail -5 "$root/tmp/redis.log")"; fi
# docs/redis.md: Debian's Redis refuses MODULE LOAD at run time.
got=$(in_root redis-cli -h 127.0.0.1 MODULE LOAD "$mod" 2>&1)
if echo "$got" | grep -qi 'not allowed\|enable-module-command'; then
  ok "run-time MODULE LOAD refused, as docs/redis.md says ($got)"
else bad "run-time MODULE LOAD: $got"; fi
in_root redis-cli -h 127.0.0.1 shutdown nosave >/dev/null 2>&1
wait $rpid 2>/dev/null

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
