# tests/lib/tap.sh -- the harness every shell test shares (tests/cli/ and,
# through tests/kafka/lib.sh, tests/kafka/); each sources it first.  It sets
# a strict shell (set -u, LC_ALL=C) and reports TAP: one `ok - ...` or
# `not ok - ...` line per check, then the tally `N passed, F failed` and
# the plan `1..N`.
#
#   tap_scratch PREFIX     a scratch directory $T under $TMPDIR (or /tmp),
#                          removed on exit after the test's own tap_cleanup
#                          (if it defines one); a signal ends the test
#   tap_bin PATH           the binary under test as $BIN (absolute); not an
#                          executable: a `not ok` line and exit 1
#   ok DESC, notok DESC    one check passed, one failed; with TAP_STOP=1 a
#                          failure ends the test: the test's tap_stopping
#                          (if it defines one) prints what it knows, then
#                          the tally, exit 1 (for tests whose later checks
#                          depend on earlier ones)
#   check DESC CMD...      ok or notok by the command's status
#   diag FILE              the first lines of FILE as TAP comments
#   tap_done               the tally and the plan; exit 0 if none failed
#
# For tests that run the bloomstage binary as a user would:
#   bs_bin PATH            tap_bin, and sanitizer builds set to die on
#                          their first report
#   bs RC DESC ARGS...     `$BIN ARGS` with the caller's stdin, stdout to
#                          ./out (or $BS_OUT), stderr to ./err, its status
#                          in $rc; one check: the status is exactly RC and
#                          stderr holds no sanitizer report
# and assertions on the last run's files and on values, each returning
# non-zero with a diagnostic (for check): err_has S..., err_empty,
# err_nonempty, err_lines N, out_empty, out_is FMT [ARGS], same A B,
# eq GOT WANT, num_in X LO HI, no_file P.
set -u
export LC_ALL=C

checks=0
failed=0

tap_exit() {
    if declare -F tap_cleanup >/dev/null; then tap_cleanup; fi
    rm -rf "$T"
}
tap_scratch() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
    trap tap_exit EXIT
    trap 'exit 1' HUP INT TERM
}

tap_bin() {
    BIN=$1
    case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
    if [ ! -x "$BIN" ]; then
        echo "not ok - $BIN is not an executable"
        exit 1
    fi
}

tap_done() {
    printf '%d passed, %d failed\n' "$((checks - failed))" "$failed"
    printf '1..%d\n' "$checks"
    [ "$failed" -eq 0 ] && exit 0
    exit 1
}

ok() { checks=$((checks + 1)); printf 'ok - %s\n' "$*"; }
notok() {
    checks=$((checks + 1))
    failed=$((failed + 1))
    printf 'not ok - %s\n' "$*"
    if [ "${TAP_STOP:-0}" = 1 ]; then
        if declare -F tap_stopping >/dev/null; then tap_stopping; fi
        tap_done
    fi
}
check() {
    local d=$1
    shift
    if "$@"; then ok "$d"; else notok "$d"; fi
}
diag() { if [ -s "$1" ]; then head -c 3000 "$1" | head -n 30 | sed 's/^/#   /'; fi; }

# -- the bloomstage binary run as a command -----------------------------------

SAN_RE='AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|Sanitizer:DEADLYSIGNAL'

bs_bin() {
    tap_bin "$1"
    # Sanitizer builds: die on the first report (CI's own settings,
    # appended after these defaults, win).  Reports are also caught on
    # stderr by bs.
    export ASAN_OPTIONS="abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
}

rc=0
bs() {
    local want=$1 desc=$2
    shift 2
    "$BIN" "$@" >"${BS_OUT:-out}" 2>err
    rc=$?
    if [ "$rc" -eq "$want" ] && ! grep -qE "$SAN_RE" err; then
        ok "$desc (exit $want)"
    else
        local why="exit $rc, want $want"
        grep -qE "$SAN_RE" err && why="$why; a sanitizer report on stderr"
        notok "$desc: $why"
        diag err
    fi
}

err_has() { # every argument is a substring of ./err
    local s
    for s in "$@"; do
        grep -qF -- "$s" err || { printf '#   stderr lacks "%s":\n' "$s"; diag err; return 1; }
    done
}
err_empty() { [ ! -s err ] || { echo "#   unexpected stderr:"; diag err; return 1; }; }
out_empty() { [ ! -s out ] || { echo "#   unexpected stdout:"; diag out; return 1; }; }
err_nonempty() { [ -s err ]; }
err_lines() { [ "$(wc -l <err)" -eq "$1" ] || { echo "#   stderr:"; diag err; return 1; }; }
# same A B: byte-identical files (cmp's message as a diagnostic).
same() { cmp -- "$1" "$2" | sed 's/^/#   /'; cmp -s -- "$1" "$2"; }
# out_is FMT [ARGS]: stdout is exactly the bytes printf FMT ARGS makes.
out_is() {
    printf "$@" >want
    same out want || { echo "#   got:"; od -c out | head -n 8 | sed 's/^/#   /'; return 1; }
}
# eq GOT WANT: string equality, with a diagnostic.
eq() { [ "$1" = "$2" ] || { printf '#   got "%s", want "%s"\n' "$1" "$2"; return 1; }; }
# num_in X LO HI: LO <= X <= HI (numbers, via awk).
num_in() {
    awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x != "" && x + 0 >= lo + 0 && x + 0 <= hi + 0) }' ||
        { printf '#   %s not in [%s, %s]\n' "$1" "$2" "$3"; return 1; }
}
# no_file P: nothing named P or P.<anything> (no leftover temp file either).
no_file() {
    local f
    for f in "$1" "$1".*; do
        if [ -e "$f" ]; then echo "#   $f exists"; return 1; fi
    done
    return 0
}
