#!/bin/bash
# The bloomstage image's entrypoint.  For `run`, before it execs bloomstage
# (PID 1 stays bloomstage: it gets SIGTERM itself): a checkpoint directory
# the image's user cannot write (a volume owned by someone else) is named
# on one line and exit 1, at once, rather than at the first checkpoint.
# It reads the configuration as `run` resolves it (`bloomstage config
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

dir=$(value checkpoint.dir)
if [ "$(value checkpoint.store)" = dir ] && [ -n "$dir" ] && [ -d "$dir" ] && ! [ -w "$dir" ]; then
  echo "bloomstage: checkpoint.dir $dir: not writable by uid $(id -u) (the volume mounted there belongs to uid $(stat -c %u "$dir")); give it to uid $(id -u) or mount a named volume" >&2
  exit 1
fi
exec "$bin" "$@"
