#!/bin/sh
# Run a program inside a new user and network namespace (`unshare -rn`):
# root there, its own loopback and its own nftables ruleset, so a test can
# ban, flush and drop without touching the host's firewall.  Loopback gets
# two IPv6 networks for the prefix tests.  Exit 77 (skip) when the tools
# or unprivileged network namespaces are missing.
for t in unshare ip nft; do
  command -v "$t" >/dev/null 2>&1 || { echo "netns.sh: no $t" >&2; exit 77; }
done
unshare -rn true 2>/dev/null ||
  { echo "netns.sh: no unprivileged network namespaces here" >&2; exit 77; }
exec unshare -rn sh -c '
  ip link set lo up &&
  ip -6 addr add 2001:db8::2/64 dev lo nodad &&
  ip -6 addr add 2001:db8:0:1::2/64 dev lo nodad &&
  exec "$@"' netns "$@"
