#!/bin/bash
# The bloomstage image's entrypoint.  For `run` it does two things before
# it execs bloomstage (PID 1 stays bloomstage: it gets SIGTERM itself):
#
# A static group member id (consumer.group.instance.id, KIP-345) when none
# is configured: the container's hostname.  That is stable across `docker
# start`, `docker restart` and a restart policy (the same container), as a
# Kubernetes StatefulSet pod's name is across its restarts, so a killed
# instance's successor takes its partitions back at once instead of waiting
# out the group's session timeout.  The rule: it must be unique per
# instance, since two live members with one id fence each other.  Docker's
# default hostname (the container id) is; a `hostname:` shared by replicas
# is not.  Configured means set by the -c file, -X, or the environment
# (BLOOMSTAGE_CONSUMER_GROUP_INSTANCE_ID, or its _FILE form); set it empty
# in the environment to turn static membership off.
#
# A checkpoint directory the image's user cannot write (a volume owned by
# someone else) is named on one line and exit 1, at once, rather than at
# the first checkpoint.
#
# Both read the configuration as `run` resolves it (`bloomstage config
# --check` with run's -c and -X); a configuration that does not load is
# left to `run` itself to report.
set -eu
bin=/usr/local/bin/bloomstage
[ "${1:-}" = run ] || exec "$bin" "$@"

# run's -c and -X arguments, for config --check.
cfg=()
prev=""
for a in "$@"; do
  case $prev in -c | --config | -X) cfg+=("$prev" "$a") ;; esac
  case $a in --config=* | -X?*) cfg+=("$a") ;; esac
  prev=$a
done
resolved=$("$bin" config --check "${cfg[@]}" 2>/dev/null) || exec "$bin" "$@"
value() { printf '%s\n' "$resolved" | awk -v k="$1" '$1 == k && $2 == "=" { print $3; exit }'; }

if ! env | grep -q '^BLOOMSTAGE_CONSUMER_GROUP_INSTANCE_ID\(_FILE\)\{0,1\}=' &&
   [ -z "$(value consumer.group.instance.id)" ]; then
  BLOOMSTAGE_CONSUMER_GROUP_INSTANCE_ID=$(cat /proc/sys/kernel/hostname)
  export BLOOMSTAGE_CONSUMER_GROUP_INSTANCE_ID
fi

dir=$(value checkpoint.dir)
if [ "$(value checkpoint.store)" = dir ] && [ -n "$dir" ] && [ -d "$dir" ] && ! [ -w "$dir" ]; then
  echo "bloomstage: checkpoint.dir $dir: not writable by uid $(id -u) (the volume mounted there belongs to uid $(stat -c %u "$dir")); give it to uid $(id -u) or mount a named volume" >&2
  exit 1
fi
exec "$bin" "$@"
