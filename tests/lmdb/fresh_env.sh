#!/bin/sh
# fresh_env.sh DIR CMD [ARGS...]: run CMD twice against the LMDB environment
# in DIR.  DIR is removed first, so an environment left by an earlier run
# (another layout version, a full map, a stale lock) cannot decide the
# outcome; the second run then reopens the environment the first one left
# behind, from new processes, which is how a service meets it after a
# restart.
dir=$1
shift
rm -rf "$dir" || exit 1
"$@" || exit $?
"$@"
