# tests/kafka/lib.sh -- what the shell tests on a real broker share; each
# sources it first.  It sources the shell tests' harness (tests/lib/tap.sh:
# ok, notok, check, diag, tap_done), makes the scratch directory $T and
# stops on exit whatever the test started: the stage process $stage_pid,
# and every cluster under $T (scripts/kafka's --owner watchdog covers a
# test that is killed).  The first failure ends the test (later checks
# depend on earlier ones): notok prints the stage's stderr ($T/stage.err)
# and each node's log tail, then the tally, and exits 1.
# kt_bin PATH: the bloomstage binary under test as $BIN (absolute), with
# the BLOOMSTAGE_* variables of whoever runs the test unset.
# Set before sourcing: KT_NAME (the scratch directory's prefix).  $KAFKA is
# scripts/kafka unless set.  Owned by the real-broker work.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/tap.sh"
: "${KAFKA:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/kafka}"
tap_scratch "$KT_NAME"
stage_pid=""
TAP_STOP=1

tap_cleanup() {
  if [ -n "$stage_pid" ] && kill -0 "$stage_pid" 2>/dev/null; then
    kill -KILL "$stage_pid" 2>/dev/null
    wait "$stage_pid" 2>/dev/null
  fi
  local d
  for d in "$T"/*/; do
    [ -f "$d/nodes" ] && "$KAFKA" stop --dir "${d%/}" >/dev/null 2>&1
  done
}

tap_stopping() {
  if [ -s "$T/stage.err" ]; then
    echo "# --- the stage's stderr (last 40 lines)"
    tail -n 40 "$T/stage.err" | sed 's/^/# /'
  fi
  local f
  for f in "$T"/*/node*/server.log; do
    [ -f "$f" ] || continue
    echo "# --- last lines of $f"
    tail -n 15 "$f" | sed 's/^/# /'
  done
}

kt_bin() {
  tap_bin "$1"
  local v
  for v in $(compgen -e | grep '^BLOOMSTAGE_'); do unset "$v"; done
}
