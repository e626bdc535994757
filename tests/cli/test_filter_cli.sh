#!/usr/bin/env bash
# test_filter_cli.sh -- `bloomstage filter build|info|query|merge` run as a
# user runs them: lists with comments, blank lines, CRLF and stray white
# space; files and standard input; 100k-entry lists for false negatives and
# the measured false-positive rate; info fields; query exit codes; merges,
# compatible and not; damaged, empty, random and missing filter files; a FIFO
# or a directory in a filter's place (and a FIFO in a checkpoint directory,
# for `checkpoint info`), refused without blocking; filter files 0600
# whatever the umask; usage errors and --help.
#
#   bash tests/cli/test_filter_cli.sh path/to/bloomstage
#
# Prints one `ok - ...` / `not ok - ...` line per check and exits 1 if any
# failed.  Every invocation of the binary is itself a check: it must exit with
# exactly the expected status and leave no sanitizer report on stderr, so a
# crash (134, 139) or an ASan/UBSan/LSan report fails the test in a sanitizer
# build as well.  Uses bash, coreutils, awk, grep, cmp, od and dd only.
#
# A Bloom filter answers "absent" for a never-added key only with probability
# 1 - fpr, so every "absent" expectation below is made on a filter built with
# --fpr 1e-6 and a handful of keys (or, for the 100k-key measurement, against
# a stated binomial bound).  Hashing is seeded and deterministic, so a run's
# answers do not vary from run to run; the fpr argument says why a correct
# filter passes.

. "$(dirname "$0")/../lib/tap.sh"
bs_bin "${1:?usage: test_filter_cli.sh path/to/bloomstage}"
tap_scratch bs-cli-filter
cd "$T" || exit 1

# The progress bar is also switched off by this variable; the test wants to
# see that a non-terminal stderr alone switches it off.
unset BLOOMSTAGE_NO_PROGRESS
# field NAME [FILE]: the value of a `filter info` line ("%-18s %s").
field() {
    awk -v k="$1" '{ n = substr($0, 1, 18); sub(/ +$/, "", n) }
                   n == k { print substr($0, 20); exit }' "${2:-out}"
}

# -- lists ------------------------------------------------------------------

# A list with everything the list format allows.  The entries it holds,
# stripped, are in clean.txt.
printf '%s\n' '# blocklist of spam senders' '' 'spam@example.com' \
    '  leading@example.com' 'trailing@example.com   ' >messy.txt
printf '\tboth@example.com \t\ncrlf@example.com\r\n   \n\r\n' >>messy.txt
printf '%s\n' '  # indented comment' 'inner space@example.com' \
    'tag#notacomment@example.com' >>messy.txt
printf 'last@example.com  ' >>messy.txt # no newline at the end
printf '%s\n' spam@example.com leading@example.com trailing@example.com \
    both@example.com crlf@example.com 'inner space@example.com' \
    tag#notacomment@example.com last@example.com >clean.txt
n_clean=8

N=100000
awk -v n=$N 'BEGIN { for (i = 1; i <= n; i++) printf "user%d@example.com\n", i }' >keys.txt
awk -v n=$N 'BEGIN { for (i = 1; i <= n; i++) printf "other%d@example.net\n", i }' >never.txt
head -n $((N / 2)) keys.txt >half1.txt
tail -n $((N / 2)) keys.txt >half2.txt

# == help and usage errors ==================================================

for sub in "" build info query merge; do
    bs 0 "filter $sub --help" filter $sub --help
    check "filter $sub --help: usage on stdout, nothing on stderr" \
        grep -q "^usage: bloomstage filter ${sub:+$sub }" out
    check "filter $sub --help: stderr empty" test ! -s err
done
bs 0 "filter build -h" filter build -h
check "filter build -h prints the usage" grep -q '^usage: bloomstage filter build' out

# usage DESC ARGS...: exit 2, a message on stderr, nothing on stdout, and no
# filter file x.bf written.
usage() {
    local d=$1
    shift
    rm -f x.bf
    bs 2 "usage error: $d" "$@" <clean.txt
    check "usage error: $d: message on stderr" err_nonempty
    check "usage error: $d: nothing on stdout" out_empty
    check "usage error: $d: no output file" no_file x.bf
}
usage "filter without a subcommand" filter
usage "filter bogus" filter bogus
check "filter bogus: says unknown subcommand" err_has "unknown subcommand 'bogus'"
usage "build without --fpr" filter build -o x.bf clean.txt
check "build without --fpr: says --fpr is required" err_has "--fpr is required"
for p in 0 2 0.5 abc -0.01 '' 1e-2x nan inf; do
    usage "build --fpr '$p'" filter build --fpr "$p" -o x.bf clean.txt
    check "build --fpr '$p': names the value and the range" err_has "--fpr '$p'" "(0, 0.1]"
done
usage "build --fpr without a value" filter build -o x.bf clean.txt --fpr
usage "build without -o" filter build --fpr 1e-3 clean.txt
check "build without -o: says -o is required" err_has "-o OUT.bf is required"
usage "build with two lists" filter build --fpr 1e-3 -o x.bf clean.txt clean.txt
check "build with two lists: names the extra one" err_has "one LIST at most"
usage "build --bogus" filter build --bogus --fpr 1e-3 -o x.bf clean.txt
check "build --bogus: says unknown option" err_has "unknown option"
for c in 0 abc -5 1.5 10x; do
    usage "build --capacity '$c'" filter build --fpr 1e-3 --capacity "$c" -o x.bf clean.txt
done
usage "build --seed abc" filter build --fpr 1e-3 --seed abc -o x.bf clean.txt
usage "build --seed 1k (no suffixes for a seed)" filter build --fpr 1e-3 --seed 1k -o x.bf clean.txt
usage "info without FILE" filter info
usage "info with two FILEs" filter info clean.txt clean.txt
# The contract: unknown options are usage errors on every command.  `info`
# takes no options, so `--bogus` must not be read as a file name.
usage "info --bogus" filter info --bogus
usage "query without arguments" filter query
usage "query with FILE but no KEY" filter query x.bf
usage "merge without -o" filter merge clean.txt clean.txt
check "merge without -o: says what it expects" err_has "expects A B -o C"
usage "merge with one input" filter merge clean.txt -o x.bf
usage "merge with three inputs" filter merge clean.txt clean.txt clean.txt -o x.bf
usage "merge --bogus" filter merge --bogus a b -o x.bf

# == build: list format, file and standard input =============================

bs 0 "build from a list with comments, blanks, CRLF, white space" \
    filter build --fpr 1e-6 -o messy.bf messy.txt
check "build summary: names the file, counts $n_clean entries" \
    grep -qE "^messy\.bf: blocked filter, $n_clean entries \([0-9]+ distinct estimated\), capacity $n_clean, fpr 1e-06, k=[0-9]+, [0-9.]+ (B|KiB|MiB)\$" err
bs 0 "build from the stripped list" filter build --fpr 1e-6 -o clean.bf clean.txt
check "messy list and its stripped form give identical filters" same messy.bf clean.bf
bs 0 "build from standard input, LIST '-'" filter build --fpr 1e-6 -o dash.bf - <messy.txt
check "stdin '-' gives the same filter as the file" same dash.bf messy.bf
bs 0 "build from a pipe, no LIST" filter build --fpr 1e-6 -o pipe.bf < <(cat messy.txt)
check "stdin (a pipe, no LIST) gives the same filter as the file" same pipe.bf messy.bf

bs 0 "query every stripped entry" filter query messy.bf spam@example.com \
    leading@example.com trailing@example.com both@example.com \
    crlf@example.com 'inner space@example.com' tag#notacomment@example.com \
    last@example.com
check "query: one 'present<TAB>KEY' line per stripped entry, in order" \
    eq "$(cat out)" "$(sed 's/^/present\t/' clean.txt)"
# Never added; a filter at fpr 1e-6 answers absent for each with probability
# >= 1 - 1e-6 (these six together: >= 1 - 6e-6).
for k in '# blocklist of spam senders' '# indented comment' \
    '  leading@example.com' "$(printf 'crlf@example.com\r')" inner \
    space@example.com; do
    bs 1 "query '$k' (comment text or an unstripped form): absent" filter query messy.bf "$k"
    check "query '$k': prints absent<TAB>KEY" eq "$(cat out)" "$(printf 'absent\t%s' "$k")"
done

bs 0 "info on the built filter" filter info messy.bf
cp out messy.info
check "info: file"              eq "$(field file)" messy.bf
check "info: kind blocked"      eq "$(field kind)" blocked
check "info: capacity = the $n_clean entries (not the comment/blank lines)" \
    eq "$(field capacity)" "$n_clean keys"
check "info: target fpr 1e-06"  eq "$(field 'target fpr')" 1e-06
check "info: keys inserted $n_clean (adds that set a new bit)" \
    eq "$(field 'keys inserted')" "$n_clean (adds that set a new bit)"
check "info: estimated keys about $n_clean" num_in "$(field 'estimated keys')" $((n_clean - 1)) $((n_clean + 1))
check "info: 1 layer"           eq "$(field layers)" 1
check "info: default seed"      eq "$(field hash)" "XXH3-128, seed 0x626c6f6f6d737467"
check "info: file size = the file's" eq "$(field 'file size')" "$(wc -c <messy.bf | tr -d ' ') bytes"
check "info: memory line: size and bytes" \
    grep -qE '^memory +[0-9.]+ (B|KiB|MiB) \([0-9]+ bytes\)$' out
check "info: fill ratio in (0, 1)" num_in "$(field 'fill ratio')" 0.0001 0.9999
check "info: estimated fpr <= target" num_in "$(field 'estimated fpr')" 0 1e-6
check "info: probes k >= 1" num_in "$(field 'probes (k)')" 1 64
check "info: k = 16 at 1e-6, in 32-bit lanes" \
    eq "$(field 'probes (k)')/$(field 'probe scheme')" "16/32-bit lanes"
check "info: stderr empty" test ! -s err

bs 0 "build an empty list (comments only)" filter build --fpr 1e-6 -o empty-list.bf < <(printf '# nothing\n\n')
bs 0 "info on the filter of an empty list" filter info empty-list.bf
check "empty list: capacity 1, keys inserted 0" \
    eq "$(field capacity)/$(field 'keys inserted')" "1 keys/0 (adds that set a new bit)"
bs 1 "query the filter of an empty list: absent" filter query empty-list.bf spam@example.com

bs 0 "build with --capacity 1k" filter build --fpr 1e-6 --capacity 1k -o cap.bf messy.txt
bs 0 "info on --capacity 1k" filter info cap.bf
check "--capacity 1k: capacity 1000 keys" eq "$(field capacity)" "1000 keys"
bs 0 "build with --capacity below the entries" filter build --fpr 1e-6 --capacity 2 -o small.bf messy.txt
check "--capacity below the entries: warns about the fpr" \
    err_has "warning: $n_clean entries exceed --capacity 2"
bs 0 "build --seed 7" filter build --fpr 1e-6 --seed 7 -o seed7.bf messy.txt
bs 0 "info on --seed 7" filter info seed7.bf
check "--seed 7: info shows the seed" eq "$(field hash)" "XXH3-128, seed 0x0000000000000007"
check "--seed 7: a different file from the default seed's" \
    eval '! cmp -s seed7.bf messy.bf'
bs 0 "query the --seed 7 filter for every entry" filter query seed7.bf - <clean.txt

# --counting
bs 0 "build --counting" filter build --fpr 1e-6 --counting -o counting.bf messy.txt
check "build --counting: summary says counting" grep -q '^counting\.bf: counting filter' err
bs 0 "info on a counting filter" filter info counting.bf
check "--counting: info says kind counting" eq "$(field kind)" counting
check "--counting: counters line" num_in "$(field counters)" 1 1e12
check "--counting: capacity and keys inserted $n_clean" \
    eq "$(field capacity)/$(field 'keys inserted')" "$n_clean keys/$n_clean (adds minus removes)"
check "--counting: saturated counters 0" eq "$(field 'saturated counters')" 0
bs 0 "query a counting filter for every entry" filter query counting.bf - <messy.txt
bs 1 "query a counting filter for a comment's text: absent" \
    filter query counting.bf '# blocklist of spam senders'

# Failures: exit 1, the list named, the previous output left as it was.
cp clean.bf keep.bf
bs 1 "build from a missing list" filter build --fpr 1e-6 -o keep.bf no-such-list.txt
check "missing list: message names it" err_has "no-such-list.txt" "No such file"
check "missing list: the existing output is untouched" same keep.bf clean.bf
bs 1 "build from a missing list, new output" filter build --fpr 1e-6 -o new.bf no-such-list.txt
check "missing list: no output file" no_file new.bf
{
    echo ok@example.com
    head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' x
    echo
} >longline.txt
bs 1 "build from a list with a line over 1 MiB" filter build --fpr 1e-6 -o keep.bf longline.txt
check "line over 1 MiB: message names list:line and the limit" \
    err_has "longline.txt:2: line longer than 1 MiB"
check "line over 1 MiB: the existing output is untouched, no temp file left" \
    eval 'same keep.bf clean.bf && no_file keep.bf.tmp'
bs 1 "build into a missing directory" filter build --fpr 1e-6 -o no-dir/x.bf clean.txt
check "missing directory: message names the output" err_has "no-dir/x.bf"
bs 1 "build from standard input that is a directory" filter build --fpr 1e-6 -o dir.bf - <.
check "stdin a directory: says reading standard input, no output" \
    eval 'err_has "reading standard input" && no_file dir.bf'

# == 100k entries: no false negatives, measured false positives =============

bs 0 "build from $N generated entries at --fpr 1e-2" filter build --fpr 1e-2 -o keys.bf keys.txt
# Not a terminal: no progress bar (it would show after 65536 entries), only
# the one summary line.
check "stderr not a terminal: only the summary line, no progress bar" \
    eval '[ "$(wc -l <err)" -eq 1 ] && ! grep -q "$(printf "[\r\033]")" err'
check "100k build summary line" \
    grep -qE "^keys\.bf: blocked filter, $N entries \([0-9]+ distinct estimated\), capacity $N, fpr 0\.01, k=[0-9]+, [0-9.]+ (B|KiB|MiB)\$" err
bs 0 "build the same $N entries from a pipe" filter build --fpr 1e-2 -o keys-pipe.bf < <(cat keys.txt)
check "100k entries: stdin (pipe) gives the same filter as the file" same keys-pipe.bf keys.bf
bs 0 "build with --capacity 100k" filter build --fpr 1e-2 --capacity 100k -o keys-cap.bf keys.txt
check "--capacity 100k gives the same filter as the counted capacity" same keys-cap.bf keys.bf

bs 0 "query all $N listed entries from stdin: all present" filter query keys.bf - <keys.txt
check "no false negatives: $N lines, every one 'present<TAB>' + the entry, in order" \
    eval '[ "$(grep -c "^present	" out)" -eq $N ] && cut -f2- out | cmp -s - keys.txt'
bs 1 "query $N never-listed keys: some absent" filter query keys.bf - <never.txt
fp=$(grep -c '^present	' out)
absent=$(grep -c '^absent	' out)
check "never-listed keys: one answer per key" eq "$((fp + absent))" $N
# Each never-listed key is a false positive independently with p <= 0.01:
# the count is at most Binomial(N, 0.01), mean 1000, sd 31.5.  Above
# mean + 4.5 sd a correct filter lands with probability < 1e-5.
fp_max=$(awk -v n=$N -v p=0.01 'BEGIN { printf "%d", n * p + 4.5 * sqrt(n * p * (1 - p)) }')
check "false positives at --fpr 1e-2: $fp of $N <= $fp_max" num_in "$fp" 0 "$fp_max"
bs 0 "info on the 100k filter" filter info keys.bf
check "100k info: capacity $N keys, target fpr 0.01" \
    eq "$(field capacity)/$(field 'target fpr')" "$N keys/0.01"
# `keys inserted` counts the adds that set a new bit: a new key sets none
# with probability <= the filter's fpr at that moment (<= 0.01), so at most
# Binomial(N, 0.01) -- bounded as above -- are not counted.
check "100k info: keys inserted in [N - $fp_max, N]" \
    num_in "$(field 'keys inserted')" $((N - fp_max)) $N
check "100k info: estimated keys within 2% of N" \
    num_in "$(field 'estimated keys')" $((N * 98 / 100)) $((N * 102 / 100))
check "100k info: estimated fpr within [0.005, 0.0125]" \
    num_in "$(field 'estimated fpr')" 0.005 0.0125

# == query: exit codes, keys on stdin ========================================

bs 0 "query, all keys present" filter query clean.bf spam@example.com last@example.com
bs 1 "query, one key absent (fpr 1e-6)" filter query clean.bf spam@example.com nobody@example.org
check "query with an absent key: both lines printed, in order" \
    eq "$(cat out)" "$(printf 'present\tspam@example.com\nabsent\tnobody@example.org')"
printf '# keys\r\n  spam@example.com \r\n\r\nlast@example.com\r\n' >crlf-keys.txt
bs 0 "query - with CRLF keys, a comment and a blank line on stdin" filter query clean.bf - <crlf-keys.txt
check "query - CRLF: stripped keys, no CR in the output, comment skipped" \
    eq "$(od -An -c out | tr -s ' \n' ' ')" "$(printf 'present\tspam@example.com\npresent\tlast@example.com\n' | od -An -c | tr -s ' \n' ' ')"
printf 'spam@example.com\r\nnobody@example.org\r\n' >crlf-keys2.txt
bs 1 "query - with an absent key on stdin" filter query clean.bf - <crlf-keys2.txt
check "query - with an absent key: says absent for it" \
    eq "$(sed -n 2p out)" "$(printf 'absent\tnobody@example.org')"
bs 0 "query - with empty stdin" filter query clean.bf - </dev/null
check "query - with empty stdin: no output" out_empty
bs 2 "query a missing FILE" filter query no-such.bf spam@example.com
check "query a missing FILE: message names it" err_has "no-such.bf" "cannot open"
if [ -w /dev/full ]; then
    BS_OUT=/dev/full bs 2 "query with stdout on a full device" filter query keys.bf - <keys.txt
    check "query to a full device: says writing output" err_has "writing output"
fi

# == merge ===================================================================

for kind in blocked counting; do
    opt=
    [ $kind = counting ] && opt=--counting
    bs 0 "$kind: build half 1 with --capacity $N" filter build --fpr 1e-3 $opt --capacity $N -o h1-$kind.bf half1.txt
    bs 0 "$kind: build half 2 with --capacity $N" filter build --fpr 1e-3 $opt --capacity $N -o h2-$kind.bf half2.txt
    bs 0 "$kind: build both halves concatenated" filter build --fpr 1e-3 $opt --capacity $N -o cat-$kind.bf < <(cat half1.txt half2.txt)
    bs 0 "$kind: merge the halves" filter merge h1-$kind.bf h2-$kind.bf -o m-$kind.bf
    check "$kind merge: nothing on stdout" out_empty
    bs 0 "$kind merge: every key of both halves present" filter query m-$kind.bf - <keys.txt
    bs 1 "$kind half 1 alone: keys of half 2 mostly absent" filter query h1-$kind.bf - <half2.txt
    bs 0 "$kind: info on the merged filter" filter info m-$kind.bf
    cp out m-$kind.info
    bs 0 "$kind: info on the concatenated build" filter info cat-$kind.bf
    cp out cat-$kind.info
    check "$kind merge: kind, capacity, fill ratio, estimated keys as the concatenated build's" \
        eq "$(for f in kind capacity 'fill ratio' 'estimated keys'; do field "$f" m-$kind.info; done)" \
        "$(for f in kind capacity 'fill ratio' 'estimated keys'; do field "$f" cat-$kind.info; done)"
done
# Union by OR (by adding counters) is exact, so the cells are the same bytes
# as a filter built from the concatenated list.  The counting filter counts
# inserts by adding, so its whole file is the same too.  A blocked filter
# counts only the adds that set a new bit, which a merge cannot know when
# the inputs overlap: bf_blocked_merge sets `keys inserted` to the estimate
# from the bit count (filters/blocked.c), so that 8-byte field of the layer
# descriptor (file offset 96) and the checksum trailer are allowed to
# differ, nothing else.
check "counting merge equals the concatenated build byte for byte" \
    same m-counting.bf cat-counting.bf
only_inserts_differ() {
    local size
    size=$(wc -c <"$1")
    [ "$size" -eq "$(wc -c <"$2")" ] || { echo "#   sizes differ"; return 1; }
    cmp -l -- "$1" "$2" | awk -v size="$size" '
        { if (!(($1 >= 97 && $1 <= 104) || $1 > size - 8)) { bad++; if (bad < 5) print "#   byte " $1 " differs" } }
        END { exit (bad > 0) }'
}
check "blocked merge equals the concatenated build except keys-inserted and checksum" \
    only_inserts_differ m-blocked.bf cat-blocked.bf
check "blocked merge: keys inserted is the estimate from the bits" \
    eq "$(field 'keys inserted' m-blocked.info | cut -d' ' -f1)" "$(field 'estimated keys' m-blocked.info)"

# Overlapping inputs, default capacity from one list: present for both.
bs 0 "build messy list at capacity 1k" filter build --fpr 1e-6 --capacity 1k -o ma.bf messy.txt
bs 0 "build 3 other keys at capacity 1k" filter build --fpr 1e-6 --capacity 1k -o mb.bf < <(printf 'x@example.org\ny@example.org\nspam@example.com\n')
bs 0 "merge overlapping filters" filter merge ma.bf mb.bf -o mab.bf
bs 0 "merged overlapping: keys of A present" filter query mab.bf - <clean.txt
bs 0 "merged overlapping: keys of B present" filter query mab.bf x@example.org y@example.org
bs 1 "merged overlapping: a key of neither absent (fpr 1e-6)" filter query mab.bf z@example.org
bs 0 "merge --output C spelled long" filter merge --output mab2.bf ma.bf mb.bf
check "merge --output: the same file as -o" same mab2.bf mab.bf

# Incompatible: refused with a reason, exit 1, C not written (nor clobbered).
bs 0 "build for incompatible merges: capacity 2k" filter build --fpr 1e-6 --capacity 2k -o cap2k.bf messy.txt
bs 0 "build for incompatible merges: fpr 1e-4" filter build --fpr 1e-4 --capacity 1k -o fpr4.bf messy.txt
bs 0 "build for incompatible merges: seed 7" filter build --fpr 1e-6 --capacity 1k --seed 7 -o seed.bf messy.txt
bs 0 "build for incompatible merges: counting" filter build --fpr 1e-6 --capacity 1k --counting -o cnt.bf messy.txt
bs 0 "build for incompatible merges: counting, capacity 2k" filter build --fpr 1e-6 --capacity 2k --counting -o cnt2k.bf messy.txt
refused() { # DESC A B REASON...
    local d=$1 a=$2 b=$3
    shift 3
    bs 1 "merge refuses $d" filter merge "$a" "$b" -o refused.bf
    check "merge refuses $d: the reason on stderr" err_has "cannot merge $a and $b: " "$@"
    check "merge refuses $d: no output file" no_file refused.bf
}
refused "different capacities" ma.bf cap2k.bf "different geometry"
refused "different fprs" ma.bf fpr4.bf "different geometry"
refused "different seeds" ma.bf seed.bf "different hash seeds"
refused "blocked into counting" cnt.bf ma.bf "cannot merge a blocked filter into a counting filter"
refused "counting into blocked" ma.bf cnt.bf "cannot merge a counting filter into a blocked filter"
refused "counting filters of different capacities" cnt.bf cnt2k.bf "different geometry"
cp clean.bf existing.bf
bs 1 "merge refused onto an existing C" filter merge ma.bf seed.bf -o existing.bf
check "refused merge: the existing C untouched" same existing.bf clean.bf
bs 1 "merge with a missing input" filter merge ma.bf no-such.bf -o refused.bf
check "merge with a missing input: named, no output" \
    eval 'err_has "no-such.bf" "cannot open" && no_file refused.bf'

# == damaged files: info exits 1, query 2, a message naming file and fault ===

cp keys.bf base.bf
size=$(wc -c <base.bf)
# flip FILE OFFSET: replaces the byte at OFFSET by its complement.
flip() {
    local v
    v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    printf "\\$(printf '%03o' $((255 - v)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
head -c 100 base.bf >trunc100.bf
head -c 40 base.bf >trunc40.bf
head -c $((size - 1)) base.bf >trunc1.bf
{ cat base.bf; printf x; } >extended.bf
cp base.bf flipped.bf && flip flipped.bf $((size / 2))
cp base.bf flipped-hdr.bf && flip flipped-hdr.bf 24 # the file-size field
cp base.bf badmagic.bf && flip badmagic.bf 0
cp base.bf badversion.bf && flip badversion.bf 8
: >empty.bf
head -c 4096 /dev/urandom >random.bf
head -c 10 /dev/urandom >random10.bf
check "damaged files differ from the original" \
    eval '! cmp -s flipped.bf base.bf && ! cmp -s badmagic.bf base.bf'
damaged() { # FILE DESC WHAT...
    local f=$1 d=$2
    shift 2
    bs 1 "info on $d" filter info "$f"
    check "info on $d: names $f and says $*" err_has "bloomstage filter info: $f: " "$@"
    check "info on $d: nothing on stdout" out_empty
    bs 2 "query on $d" filter query "$f" user1@example.com
    check "query on $d: names $f and says $*" err_has "bloomstage filter query: $f: " "$@"
    check "query on $d: nothing on stdout" out_empty
    bs 1 "merge with $d" filter merge base.bf "$f" -o merged-damaged.bf
    check "merge with $d: named, no output" eval 'err_has "$f: " && no_file merged-damaged.bf'
}
damaged trunc100.bf "a file truncated to 100 bytes" truncated
damaged trunc40.bf "a file truncated to 40 bytes" truncated "40 bytes"
damaged trunc1.bf "a file missing its last byte" truncated
damaged extended.bf "a file with a byte appended" "extended"
damaged flipped.bf "a flipped byte in the middle" "checksum mismatch" damaged
damaged flipped-hdr.bf "a flipped byte in the size field" truncated
damaged badmagic.bf "a flipped byte in the magic" "bad magic"
damaged badversion.bf "a flipped byte in the version" "format version"
damaged empty.bf "an empty file" truncated "0 bytes"
damaged random.bf "4 KiB of random bytes" "bad magic"
damaged random10.bf "10 random bytes" truncated
damaged no-such.bf "a missing file" "cannot open" "No such file"
mkdir adir.bf
damaged adir.bf "a directory" "a directory, not a regular file"

# == files that are not regular, and modes ==================================

# A FIFO where a filter or a checkpoint should be: refused by name, at once
# (an open would wait for a writer for ever).  Every run through timeout(1):
# one that blocks is killed after 10 s, exit 124, and fails its check.
real_bin=$BIN
printf '#!/bin/sh\nexec timeout 10 "%s" "$@"\n' "$real_bin" >bs-within-10s
chmod +x bs-within-10s
BIN=$T/bs-within-10s
mkfifo fifo.bf
damaged fifo.bf "a FIFO" "a FIFO, not a regular file"
mkdir ckpt-fifo
mkfifo ckpt-fifo/in-0.ckpt
bs 1 "checkpoint info with a FIFO in the directory" checkpoint info ckpt-fifo
check "checkpoint info with a FIFO: names it in its row" \
    grep -qF "ckpt-fifo/in-0.ckpt: a FIFO, not a regular file" out
BIN=$real_bin

# Filter files are 0600 whatever the umask (docs/security.md, "Secrets and files on
# the machine"): a filter tells whether any key one tries is in it.
old_umask=$(umask)
umask 000
bs 0 "build with umask 000" filter build --fpr 1e-6 -o mode.bf clean.txt
bs 0 "merge with umask 000" filter merge mode.bf clean.bf -o mode-merged.bf
umask "$old_umask"
check "a built filter is 0600" eq "$(stat -c %a mode.bf)" 600
check "a merged filter is 0600" eq "$(stat -c %a mode-merged.bf)" 600

tap_done
