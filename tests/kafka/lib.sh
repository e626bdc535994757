# tests/kafka/lib.sh -- what the shell tests on a real broker share; each
# sources it first.  It sets a strict locale, makes the scratch directory
# $T (removed on exit), and stops on exit whatever the test started: the
# stage process $stage_pid, and every cluster under $T (scripts/kafka's
# --owner watchdog covers a test that is killed).  Reporting, TAP-like:
#   ok DESCRIPTION             counts a pass
#   not_ok DESCRIPTION         prints the stage's stderr ($T/stage.err) and
#                              each node's log tail, the tally, and exits 1
#                              (later checks depend on earlier ones)
#   check DESCRIPTION CMD...   ok or not_ok by the command's status
#   kt_done                    the final tally, exit 0
# and kt_bin PATH: the bloomstage binary under test as $BIN (absolute),
# with the BLOOMSTAGE_* variables of whoever runs the test unset.
# Set before sourcing: KT_NAME (the scratch directory's prefix).  $KAFKA is
# scripts/kafka unless set.  Owned by the real-broker work.
set -u
export LC_ALL=C
: "${KAFKA:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/kafka}"
T=$(mktemp -d "${TMPDIR:-/tmp}/$KT_NAME.XXXXXX") || exit 1
stage_pid=""
pass=0

kt_cleanup() {
  if [ -n "$stage_pid" ] && kill -0 "$stage_pid" 2>/dev/null; then
    kill -KILL "$stage_pid" 2>/dev/null
    wait "$stage_pid" 2>/dev/null
  fi
  local d
  for d in "$T"/*/; do
    [ -f "$d/nodes" ] && "$KAFKA" stop --dir "${d%/}" >/dev/null 2>&1
  done
  rm -rf "$T"
}
trap kt_cleanup EXIT
trap 'exit 1' HUP INT TERM

ok() { echo "ok - $*"; pass=$((pass + 1)); }
not_ok() {
  echo "not ok - $*"
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
  echo "$pass passed, 1 failed"
  exit 1
}
check() {
  local what=$1
  shift
  if "$@"; then ok "$what"; else not_ok "$what"; fi
}
kt_done() {
  echo "$pass passed, 0 failed"
  exit 0
}

kt_bin() {
  BIN=$1
  case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
  [ -x "$BIN" ] || { echo "not ok - $BIN is not an executable"; exit 1; }
  local v
  for v in $(compgen -e | grep '^BLOOMSTAGE_'); do unset "$v"; done
}
