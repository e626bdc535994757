#!/usr/bin/env bash
# test_dedup_cli.sh -- `bloomstage dedup` run as a user runs it, against
# awk '!seen[$0]++': a 200k-line stream with many duplicates (from a file,
# from a pipe, across filter layers, at a loose fpr), empty input, a last
# line without '\n', CRLF and white space kept as line content, NUL bytes,
# 1 MiB lines, a line over the 64 MiB limit, --stats, --max-memory (sizes in
# powers of 1024, as the config reads them), write and read errors, usage
# errors and --help; --window-lines against an awk model of the windowed
# filter (exact at the default fpr, as above), periodic streams at the
# contract's two edges, flat memory (the filter's, and peak RSS) with
# --window-lines; --audit against the true rate of an undersized filter,
# and its rescue; with --window-lines, that the sample forgets with the
# window.
#
#   bash tests/cli/test_dedup_cli.sh path/to/bloomstage
#
# Prints one `ok - ...` / `not ok - ...` line per check and exits 1 if any
# failed.  Every invocation of the binary is itself a check: it must exit with
# exactly the expected status and leave no sanitizer report on stderr, so a
# crash (134, 139) or an ASan/UBSan/LSan report fails the test in a sanitizer
# build as well.  Uses bash, coreutils, awk, grep, cmp, od and dd only.
#
# dedup drops a never-seen line with probability <= --fpr over the whole
# stream (the scalable filter's compound bound).  At the default 1e-6 on
# ~57k distinct lines the expected number of wrongly dropped lines is at most
# 0.06, so the checks at the default rate demand exact equality with awk
# (a correct build fails one with probability < 6%, and since the hash seed
# is fixed, the answer is the same on every run: if it passes once it
# passes always).  The run at --fpr 1e-2 is checked against a binomial bound.

. "$(dirname "$0")/../lib/tap.sh"
bs_bin "${1:?usage: test_dedup_cli.sh path/to/bloomstage}"
tap_scratch bs-cli-dedup
cd "$T" || exit 1

awk_dedup() { awk '!seen[$0]++' "$@"; }

# 200,000 lines of ~57k distinct values, a few of them empty lines; a
# 32-bit LCG in awk (products stay below 2^53, so every awk computes the
# same stream).
N=200000
awk -v n=$N 'BEGIN {
    x = 12345
    for (i = 0; i < n; i++) {
        x = (x * 69069 + 1) % 4294967296
        v = int(x / 65536) % 60000
        if (v % 10007 == 0) print ""; else print "event-" v
    }
}' >big.txt
awk_dedup big.txt >big.awk
D=$(wc -l <big.awk | tr -d ' ')
check "the generated stream has many duplicates ($D distinct of $N)" num_in "$D" 1000 $((N / 2))

# == help and usage errors ==================================================

for h in --help -h; do
    bs 0 "dedup $h" dedup $h </dev/null
    check "dedup $h: usage on stdout" grep -q '^usage: bloomstage dedup' out
    check "dedup $h: stderr empty" err_empty
done
usage() { # DESC ARGS...: exit 2, a message on stderr, nothing on stdout
    local d=$1
    shift
    bs 2 "usage error: $d" "$@" <big.txt
    check "usage error: $d: message on stderr" err_nonempty
    check "usage error: $d: nothing on stdout" out_empty
}
for p in 0 2 0.5 abc -1e-3 '' nan 1e-2x; do
    usage "dedup --fpr '$p'" dedup --fpr "$p"
    check "dedup --fpr '$p': names the value and the range" err_has "--fpr '$p'" "(0, 0.1]"
done
for c in 0 abc -5 1.5 10x; do
    usage "dedup --capacity '$c'" dedup --capacity "$c"
    check "dedup --capacity '$c': names the value" err_has "--capacity '$c'"
done
for m in 0 abc -1 1.5; do
    usage "dedup --max-memory '$m'" dedup --max-memory "$m"
    check "dedup --max-memory '$m': names the value" err_has "--max-memory '$m'"
done
# Sizes are read as the config reads them (bs_config_parse_size): digits and
# one suffix k, M, G, T, powers of 1024; no fractions, exponents or units.
for m in 1.5M 1e6 512MB 1KiB 1kk '1 k' +1k; do
    usage "dedup --max-memory '$m' (not a size)" dedup --max-memory "$m"
    check "dedup --max-memory '$m': says what a size is" \
        err_has "--max-memory '$m' is not a size (digits, optionally followed by k, M, G or T: KiB, MiB, GiB, TiB)"
done
usage "dedup --max-memory 9000000T (overflow)" dedup --max-memory 9000000T
check "dedup --max-memory 9000000T: too large" err_has "--max-memory '9000000T' is too large for a 64-bit integer"
usage "dedup --fpr without a value" dedup --fpr
usage "dedup --bogus" dedup --bogus
check "dedup --bogus: points at --help" err_has "dedup --help"
usage "dedup with a file argument" dedup big.txt
check "dedup with a file argument: says input is standard input" \
    err_has "unexpected argument 'big.txt'"

# == the big stream against awk ==============================================

bs 0 "dedup $N lines from a file" dedup <big.txt
check "dedup = awk '!seen[\$0]++' on $N lines (exact: see the fpr note at the top)" same out big.awk
check "dedup without --stats: stderr empty" err_empty
bs 0 "dedup $N lines from a pipe, --stats" dedup --stats < <(cat big.txt)
check "dedup from a pipe = awk" same out big.awk
check "--stats: one line on stderr" err_lines 1
check "--stats: lines $N, written $D, dropped $((N - D)), layers, memory, fpr and bound" \
    grep -qE "^lines $N, written $D, dropped $((N - D)), layers 1, memory [0-9.]+ (B|KiB|MiB|GiB), estimated fpr [0-9.e+-]+ \\(bound 1e-06\\)\$" err
bs 0 "dedup --capacity 1000 --stats (the filter grows layers)" dedup --capacity 1000 --stats <big.txt
check "dedup across layers = awk" same out big.awk
layers=$(sed -n 's/.*, layers \([0-9]*\),.*/\1/p' err)
check "--capacity 1000 on $D distinct lines: several layers ($layers)" num_in "$layers" 3 64
est=$(sed -n 's/.*estimated fpr \([^ ]*\) (bound.*/\1/p' err)
check "--capacity 1000: estimated fpr within the bound ($est <= 1e-6)" num_in "$est" 0 1e-6
bs 0 "dedup --max-memory 100M (not reached)" dedup --max-memory 100M <big.txt
check "dedup --max-memory 100M = awk" same out big.awk

# At --fpr 1e-2 some new lines are dropped: the output must still be a
# subsequence of awk's (no line twice, none invented, order kept), missing
# at most Binomial(D, 0.01) lines -- checked at mean + 4.5 sd.
bs 0 "dedup --fpr 1e-2 --capacity 1000" dedup --fpr 1e-2 --capacity 1000 <big.txt
subsequence() { # A B: every line of A appears in B, in order
    awk 'NR == FNR { a[++n] = $0; next }
         { while (j < n && a[++j] != $0) ; if (j > n || a[j] != $0) bad = 1 }
         END { exit bad }' "$2" "$1"
}
check "--fpr 1e-2: the output is a subsequence of awk's" subsequence out big.awk
check "--fpr 1e-2: no line written twice" eval 'awk_dedup out | cmp -s - out'
missing=$((D - $(wc -l <out)))
bound=$(awk -v n="$D" -v p=0.01 'BEGIN { printf "%d", n * p + 4.5 * sqrt(n * p * (1 - p)) }')
check "--fpr 1e-2: $missing of $D distinct lines dropped <= $bound" num_in "$missing" 0 "$bound"

# == line content ============================================================

bs 0 "dedup of empty input" dedup </dev/null
check "empty input: empty output" out_empty
bs 0 "dedup --stats of empty input" dedup --stats </dev/null
check "empty input --stats: lines 0, written 0, dropped 0" err_has "lines 0, written 0, dropped 0, "
printf 'a\nb\nc' >in
bs 0 "a new last line without newline" dedup <in
check "a new last line without newline gets one" out_is 'a\nb\nc\n'
printf 'a\nb\na' >in
bs 0 "a duplicate last line without newline" dedup <in
check "a duplicate last line without newline is dropped (same line as 'a\\n')" out_is 'a\nb\n'
printf 'x' >in
bs 0 "a single line without newline" dedup <in
check "a single line without newline: 'x\\n'" out_is 'x\n'
printf 'a\r\na\nb\r\nb\na\r\nb\n' >in
bs 0 "CRLF and LF lines" dedup <in
check "CRLF lines are distinct from LF lines, CR kept" out_is 'a\r\na\nb\r\nb\n'
check "CRLF: the same as awk (raw lines)" eval 'awk_dedup in | cmp -s - out'
printf ' a\na\na \n a\n\ta\na\t\n' >in
bs 0 "white space in lines" dedup <in
check "leading/trailing white space is line content" out_is ' a\na\na \n\ta\na\t\n'
printf '\n\na\n\nb\n\n' >in
bs 0 "empty lines" dedup <in
check "an empty line is a line: written once" out_is '\na\nb\n'
# awk implementations differ on NUL bytes (mawk and gawk keep them, others
# cut the line), so the expected bytes are spelled out: dedup compares whole
# lines as bytes, NULs included ("a\0b" is neither "a" nor "a\0c").
printf 'a\0b\na\0c\na\0b\na\n\0\n\0\n' >in
bs 0 "lines with NUL bytes" dedup <in
check "NUL bytes are line content" out_is 'a\0b\na\0c\na\n\0\n'

# 1 MiB lines: the output buffer is 1 MiB, so a 1 MiB line (plus its '\n')
# takes the direct-write path and a (1 MiB - 1) line just fits the buffer.
MB=1048576
head -c $MB /dev/zero | tr '\0' x >L
head -c $((MB - 1)) /dev/zero | tr '\0' y >L1
{
    cat L; echo; echo short; cat L; echo; cat L1; echo; cat L; printf 'z\n'
    cat L1; echo; echo short; cat L
} >in # the last line, a duplicate of L, has no newline
{ cat L; echo; echo short; cat L1; echo; cat L; printf 'z\n'; } >want-long
bs 0 "1 MiB lines from a file" dedup <in
check "1 MiB lines: each written once, whole" same out want-long
bs 0 "1 MiB lines from a pipe" dedup < <(cat in)
check "1 MiB lines from a pipe: the same" same out want-long
{ echo short; cat L; } >in # a new 1 MiB last line without newline
bs 0 "a new 1 MiB last line without newline" dedup <in
{ echo short; cat L; echo; } >want-long
check "a new 1 MiB last line without newline gets one" same out want-long
rm -f L L1 want-long

# Over the 64 MiB line limit: exit 1, the lines before written.  (From a
# file: from a pipe the reader rescans the partial line on every 64 KiB
# read, which takes seconds for 64 MiB under ASan.)
{ echo first; echo first; head -c $((64 * MB + 1)) /dev/zero | tr '\0' x; echo; echo after; } >in
bs 1 "a line over 64 MiB" dedup <in
check "a line over 64 MiB: says which line and why" err_has "reading line 3: line longer than 64 MiB"
check "a line over 64 MiB: the output up to it" out_is 'first\n'
rm -f in

# == --max-memory ============================================================

bs 1 "--max-memory 1k below the first layer" dedup --max-memory 1k <big.txt
check "--max-memory 1k is 1024 bytes: says the first layer passes that cap" err_has "would pass the cap of 1024 bytes"
check "--max-memory 1k: no output" out_empty
# Sizes mean what they mean in the config: 512M is 512 MiB (dedup.max.bytes
# reads it the same way; tests/unit/test_config.c).  A first layer of 1G lines
# needs more, so the cap shows in the message before anything is read.
for m in 512M 512m 524288k 536870912; do
    bs 1 "--capacity 1G --max-memory $m: the first layer passes the cap" \
        dedup --capacity 1G --max-memory "$m" </dev/null
    check "--max-memory $m is 536870912 bytes" err_has "would pass the cap of 536870912 bytes"
done
bs 1 "--capacity 1G --max-memory 2G: the first layer passes the cap" \
    dedup --capacity 1G --max-memory 2G </dev/null
check "--max-memory 2G is 2147483648 bytes" err_has "would pass the cap of 2147483648 bytes"
bs 1 "--max-memory 20k reached mid-stream (--capacity 1000)" dedup --capacity 1000 --max-memory 20k <big.txt
check "--max-memory reached: the message names the line and --max-memory" \
    grep -qE '^bloomstage dedup: line [0-9]+: the filter cannot grow past [0-9.]+ KiB \(--max-memory\); output is complete up to the line before$' err
at=$(sed -n 's/^bloomstage dedup: line \([0-9]*\): .*/\1/p' err)
check "--max-memory reached past the first layer (line $at > 1000)" num_in "$at" 1001 $((N - 1))
head -n $((at - 1)) big.txt | awk_dedup >want
check "--max-memory reached: output = awk on the lines before line $at" same out want
line_at=$(sed -n "${at}p" big.txt)
check "--max-memory reached: line $at is new (a duplicate needs no growth)" \
    eval '! grep -qxF -- "$line_at" out'

# == I/O errors ==============================================================

if [ -w /dev/full ]; then
    BS_OUT=/dev/full bs 1 "stdout on a full device" dedup <big.txt
    check "stdout on a full device: says writing output" err_has "writing output"
    head -c $((2 * MB)) /dev/zero | tr '\0' x >in
    BS_OUT=/dev/full bs 1 "a 2 MiB line to a full device" dedup <in
    check "a 2 MiB line to a full device: says writing output" err_has "writing output"
    rm -f in
fi
bs 1 "stdin a directory" dedup <.
check "stdin a directory: says reading line 1" err_has "reading line 1: "
check "stdin a directory: no output" out_empty


# == --window-lines: forgetting after N lines ================================

# The windowed filter in awk, time = line number, W = N + 1: slice
# int(t*G/W); a line is dropped iff it was written in one of the last G+1
# slices.  The model also checks the contract itself: a dropped line was
# written less than W(1+1/G) lines before, a written one not within N.
win_model() { # N G < in > out
    awk -v N="$1" -v G="$2" 'BEGIN { W = N + 1 }
    {
        s = int(NR * G / W)
        if (($0 in last) && last[$0] >= s - G) {
            if (NR - pos[$0] >= W * (1 + 1 / G)) { print "model: late drop" > "/dev/stderr"; exit 1 }
            next
        }
        if (($0 in pos) && NR - pos[$0] <= N) { print "model: early write" > "/dev/stderr"; exit 1 }
        last[$0] = s; pos[$0] = NR; print
    }'
}
for ng in "5000 4" "997 7" "30000 1"; do
    set -- $ng
    win_model "$1" "$2" <big.txt >want-win
    bs 0 "dedup --window-lines $1 --generations $2" dedup --window-lines "$1" --generations "$2" <big.txt
    check "--window-lines $1 --generations $2 = the awk model ($(wc -l <want-win) lines)" same out want-win
done
check "--window-lines forgets: more lines out than awk's $D" num_in "$(wc -l <want-win)" $((D + 1)) $N

# Periodic streams: line i is key (i mod P).  A copy is dropped while the
# copy that was written is less than a window back, so with P <= N a key
# comes out again once every ~1.25 windows, never twice within N lines (the
# model checks that); with P > (N+1)(1+1/G) = 1251.25 for N = 1000, G = 4,
# every line comes out.
periodic() { awk -v p="$1" -v n="$2" 'BEGIN { for (i = 0; i < n; i++) print "k" (i % p) }'; }
periodic 1000 100000 >in
win_model 1000 4 <in >want-win
bs 0 "period 1000, --window-lines 1000" dedup --window-lines 1000 <in
check "period 1000 in a window of 1000 lines = the model ($(wc -l <want-win) lines)" same out want-win
periodic 1252 100000 >in
bs 0 "period 1252, --window-lines 1000" dedup --window-lines 1000 <in
check "period 1252 beyond 1.25 windows: every line written again" same out in
periodic 1 5000 >in
win_model 1 2 <in >want-win
bs 0 "one line 5000 times, --window-lines 1" dedup --window-lines 1 <in
check "one line repeated, window of 1 line (G becomes 2): every third line" \
    same out want-win
check "one line repeated: 1667 times" num_in "$(wc -l <out)" 1667 1667

# Memory follows the window, not the stream: 10x the distinct lines, the
# same memory (and without a window, it grows).
mem_of() { sed -n 's/.*memory \([^,]*\),.*/\1/p' err; }
awk 'BEGIN { for (i = 0; i < 100000; i++) print "u" i }' >in
bs 0 "100k distinct lines, --window-lines 2000 --stats" dedup --window-lines 2000 --stats <in
m1=$(mem_of)
check "--window-lines --stats: generations and lines in the window" err_has "generations 5, estimated lines in the window"
awk 'BEGIN { for (i = 0; i < 1000000; i++) print "u" i }' >in
bs 0 "1M distinct lines, --window-lines 2000 --stats" dedup --window-lines 2000 --stats <in
m2=$(mem_of)
check "memory with a window: the same for 100k and 1M lines ($m1, $m2)" test -n "$m1" -a "$m1" = "$m2"
bs 0 "1M distinct lines, no window --stats" dedup --capacity 1000 --stats <in
m3=$(mem_of)
check "memory without a window grows ($m3 vs $m1)" test "$m3" != "$m1"
# Peak RSS (GNU time) follows: 10x the lines, the same RSS within 1 MiB with
# a window; without one it grows by the filter.  Skipped (said) without
# /usr/bin/time (scripts/install-deps installs it) and in a sanitizer build
# (ASan's quarantine keeps freed generations).
if ldd "$BIN" 2>/dev/null | grep -q 'libasan'; then
    echo "# skipped: peak RSS checks in a sanitizer build"
elif [ -x /usr/bin/time ]; then
    rss() { /usr/bin/time -f %M "$BIN" dedup "$@" <in 2>&1 >/dev/null | tail -n 1; }
    awk 'BEGIN { for (i = 0; i < 100000; i++) print "u" i }' >in
    r1=$(rss --window-lines 2000)
    awk 'BEGIN { for (i = 0; i < 1000000; i++) print "u" i }' >in
    r2=$(rss --window-lines 2000)
    r3=$(rss --capacity 1000)
    check "peak RSS with a window: 100k lines ${r1} KiB, 1M lines ${r2} KiB (within 1 MiB)" \
        num_in "$((r2 - r1))" -1024 1024
    check "peak RSS without a window grows: ${r3} KiB > ${r2} KiB + 2 MiB" \
        num_in "$r3" $((r2 + 2048)) 100000000
else
    echo "# skipped: peak RSS checks need /usr/bin/time"
fi
rm -f in want-win

usage "--window-lines 0" dedup --window-lines 0
check "--window-lines 0: says what it must be" err_has "--window-lines '0' must be a whole number"
usage "--generations 65" dedup --window-lines 10 --generations 65
check "--generations 65: says the range" err_has "--generations '65' must be a whole number in 1..64"
usage "--generations without --window-lines" dedup --generations 4
check "--generations alone: says it needs --window-lines" err_has "--generations needs --window-lines"

# == --audit ==================================================================
#
# The audit sample beside the filter.  At the default rate on big.txt it
# must change nothing (no false positive to rescue: see the fpr note at the
# top).  At --fpr 1e-1 with --capacity 100 (layers grown ~600x) about 5% of
# new lines are dropped; the truth is (D - written) / D with rescue off, and
# it must lie in the audit's 95% interval from ~3600 sampled lookups at
# rate 1/16.  For a random hash seed that fails with probability about 5%;
# the seed is fixed, so the check gives the same answer on every run.  With
# rescue on, the filter's answers are the same (a rescued line was
# maybe-present already, so nothing is added), so exactly the audit's
# false positives are written on top: every sampled new line is written.

for a in abc 2 -0.1 nan; do
    usage "dedup --audit '$a'" dedup --audit "$a"
    check "dedup --audit '$a': names the value and the range" err_has "--audit '$a'" "[0, 1]"
done
usage "--no-audit-rescue without --audit" dedup --no-audit-rescue
check "--no-audit-rescue alone: says it needs --audit" err_has "--no-audit-rescue needs --audit"

bs 0 "dedup --audit 1/1024 at the default fpr" dedup --audit 0.0009765625 <big.txt
check "--audit at the default fpr: output = awk" same out big.awk
check "--audit: one line on stderr, the audit's" err_lines 1
check "--audit: rate 1/1024, no false positive, nothing rescued, the bound" \
    grep -qE "^audit: rate 1/1024, sampled lookups [0-9]+, false positives 0, measured fpr 0 \\(95% 0\\.\\.[0-9.e-]+\\), estimated fpr [0-9.e+-]+ \\(bound 1e-06\\), rescued 0, memory [0-9.]+ (B|KiB|MiB) \\([0-9.]+% of the filter's\\)\$" err
bs 0 "dedup --audit 0 (off)" dedup --audit 0 <big.txt
check "--audit 0: no audit line" err_empty

loose=(dedup --fpr 1e-1 --capacity 100)
bs 0 "an undersized filter, no audit" "${loose[@]}" <big.txt
mv out loose.plain
bs 0 "an undersized filter, --audit 1/16 --no-audit-rescue --stats" "${loose[@]}" --audit 0.0625 --no-audit-rescue --stats <big.txt
check "--no-audit-rescue: the output is the plain run's" same out loose.plain
check "--audit --stats: the stats line, then the audit's" err_lines 2
W=$(wc -l <out | tr -d ' ')
field() { sed -n "s/^audit: .*$1 \([0-9.e+-]*\).*/\1/p" err; }
fp=$(field "false positives")
looked=$(field "sampled lookups")
lo=$(sed -n 's/^audit: .*(95% \([0-9.e+-]*\)\.\.\([0-9.e+-]*\)).*/\1/p' err)
hi=$(sed -n 's/^audit: .*(95% \([0-9.e+-]*\)\.\.\([0-9.e+-]*\)).*/\2/p' err)
truth=$(awk -v d="$D" -v w="$W" 'BEGIN { printf "%.6f", (d - w) / d }')
check "undersized: a measurable rate ($truth: $((D - W)) of $D new lines dropped)" num_in "$truth" 0.01 0.1
check "undersized: sampled lookups $looked near $D/16 (within 5.33 sd)" \
    num_in "$looked" "$(awk -v d="$D" 'BEGIN { m = d / 16; printf "%d", m - 5.33 * sqrt(m) }')" \
    "$(awk -v d="$D" 'BEGIN { m = d / 16; printf "%d", m + 5.33 * sqrt(m) }')"
check "undersized: the true rate $truth lies in the audit's 95% interval [$lo, $hi]" \
    num_in "$truth" "$lo" "$hi"
check "--no-audit-rescue: rescued 0" err_has "rescued 0,"
bs 0 "an undersized filter, --audit 1/16 (rescue on)" "${loose[@]}" --audit 0.0625 <big.txt
check "rescue: the output is a subsequence of awk's" subsequence out big.awk
check "rescue: no line written twice" eval 'awk_dedup out | cmp -s - out'
Wr=$(wc -l <out | tr -d ' ')
check "rescue: written $Wr = $W + the $fp sampled new lines the filter dropped" eq "$Wr" "$((W + fp))"
check "rescue: rescued $fp" err_has "rescued $fp,"
bs 0 "--audit with --window-lines" dedup --window-lines 1000 --audit 0.0625 <big.txt
check "--audit with a window: the audit line" err_has "audit: rate 1/16, sampled lookups"
# The sample forgets with the window: 100 keys in turn, 3 times, through a
# window of 10 lines: every line is written again, and each is a sampled
# lookup of a line the window forgot (300, not the 100 of a sample that
# never forgets).
periodic 100 300 >periodic.txt
bs 0 "--audit 1 --window-lines 10 on 100 keys x 3" dedup --window-lines 10 --audit 1 <periodic.txt
check "window: every line written" same out periodic.txt
check "window: the sample forgets with it (300 lookups, no false positive)" \
    err_has "sampled lookups 300, false positives 0,"
rm -f periodic.txt
rm -f loose.plain

tap_done
