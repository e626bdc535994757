#!/usr/bin/env bash
# test_stage_kafka.sh -- `bloomstage run` end to end against a real Apache
# Kafka broker (one node, from scripts/kafka), with Kafka's own tools on the
# other side: no librdkafka and no C harness in the test itself.
#
#   bash tests/kafka/test_stage_kafka.sh path/to/bloomstage [path/to/scripts/kafka]
#
# The topics in, out and rej are created with kafka-topics (the broker does
# not auto-create them, as in production).  A known stream of sign-up events
# keyed by id goes to `in` with the console producer, each record with a
# header seq:N: every 10th id sent twice in a row, the first 100 ids
# replayed at the end, every 25th id from a sender on config/spam-senders.txt
# (blocklist.spam, by json:/from), every 41st other id on a key list
# (blocklist.keys, by the record key).  The stage runs until out and rej
# hold as many records as went in, then gets SIGTERM and must exit 0.
# Kafka's console consumer reads out and rej at read_committed with headers,
# and the test asserts exactly what must be there, record by record:
#   - out: the first record of every id that is on no list, once, with its
#     key, value and headers `seq:N,bloomstage-src:in:P:O` (P:O its place
#     in `in`);
#   - rej: every other record, with `bloomstage-reason` duplicate,
#     blocklist:spam or blocklist:keys after bloomstage-src;
#   - no other record in either topic (read at read_committed; the end
#     offsets also count the transactions' markers);
#   - the group's committed offsets on `in` equal its end offsets (Kafka's
#     consumer-groups tool);
#   - the stage's `stopped` line counts the same.
# Prints `ok - ...` / `not ok - ...`, and on a failure what differs, the
# stage's stderr and the broker's log tail; exits 1 at the first failure.
# Every wait is bounded; the stage and the broker are stopped on exit (a
# trap, and scripts/kafka's --owner watchdog if the test is killed).  Owned
# by the real-broker work (scripts/kafka).

KT_NAME=bs-stage-kafka
. "$(dirname "$0")/lib.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
kt_bin "${1:?usage: test_stage_kafka.sh path/to/bloomstage [path/to/scripts/kafka]}"
KAFKA=${2:-$KAFKA}
K=$T/kafka
GROUP=bs-kafka-e2e
kafka_tool() { "$KAFKA" tool "$@" --dir "$K"; }

# Sum of the end offsets of topic $1 (GetOffsetShell: TOPIC:PARTITION:END).
end_offsets() { kafka_tool get-offsets --topic "$1" 2>/dev/null; }
end_sum() {
  local out
  out=$(end_offsets "$1") || return 1
  awk -F: -v t="$1" '$1 == t { s += $3; n++ } END { if (!n) exit 1; print s }' <<<"$out"
}

# Reads $2 records of topic $1 at read_committed from the beginning (or
# fewer, if none comes for $3 ms, default 30000), one line each:
# PARTITION OFFSET HEADERS KEY VALUE, tab-separated.
read_topic() {
  kafka_tool console-consumer --topic "$1" --from-beginning --max-messages "$2" \
    --timeout-ms "${3:-30000}" --isolation-level read_committed \
    --property print.partition=true --property print.offset=true \
    --property print.headers=true --property print.key=true 2>"$T/read-$1.err" |
    sed 's/^Partition:\([0-9]*\)\tOffset:\([0-9]*\)\t/\1\t\2\t/'
}

# -- the stream and what must come of it --------------------------------------

# The senders of config/spam-senders.txt (the stage reads the file itself).
grep -v '^#' "$repo/config/spam-senders.txt" | grep . >"$T/spam.txt"
[ -s "$T/spam.txt" ] || notok "config/spam-senders.txt lists no sender"
# One line per record, in the order sent: SEQ KEY FROM; input.txt is what
# the console producer reads (headers TAB key|value); keys.txt the key list.
awk -v keys="$T/keys.txt" '
  NR == FNR { spam[n++] = $0; next }
  function rec(i,   key, from) {
    key = sprintf("evt-%04d", i)
    from = (i % 25 == 0) ? spam[i % n] : "user" i "@mail.example"
    seq++
    printf "%d %s %s\n", seq, key, from > "/dev/stderr"
    printf "seq:%d\t%s|{\"id\":\"%s\",\"type\":\"signup\",\"from\":\"%s\"}\n", seq, key, key, from
  }
  END {
    for (i = 1; i <= 600; i++) {
      if (i % 41 == 0 && i % 25 != 0) print sprintf("evt-%04d", i) > keys
      rec(i)
      if (i % 10 == 0) rec(i)
    }
    for (i = 1; i <= 100; i++) rec(i)
  }' "$T/spam.txt" /dev/null >"$T/input.txt" 2>"$T/stream.txt"
N=$(wc -l <"$T/input.txt")
[ "$N" = 760 ] || notok "the generated stream has $N records, not 760"

# The model: blocklists first (spam by sender, keys by key), then dedup by
# key.  model.txt: SEQ KEY TOPIC [REASON].
awk 'FILENAME == ARGV[1] { spam[$0] = 1; next }
     FILENAME == ARGV[2] { listed[$0] = 1; next }
     {
       if ($3 in spam) print $1, $2, "rej", "blocklist:spam"
       else if ($2 in listed) print $1, $2, "rej", "blocklist:keys"
       else if ($2 in seen) print $1, $2, "rej", "duplicate"
       else { print $1, $2, "out"; seen[$2] = 1 }
     }' "$T/spam.txt" "$T/keys.txt" "$T/stream.txt" >"$T/model.txt"
want_out=$(awk '$3 == "out"' "$T/model.txt" | wc -l)
want_rej=$(awk '$3 == "rej"' "$T/model.txt" | wc -l)
want_dup=$(awk '$4 == "duplicate"' "$T/model.txt" | wc -l)
want_spam=$(awk '$4 == "blocklist:spam"' "$T/model.txt" | wc -l)
want_keys=$(awk '$4 == "blocklist:keys"' "$T/model.txt" | wc -l)
# The stream exercises every path.
[ "$want_out" -gt 400 ] && [ "$want_dup" -gt 100 ] && [ "$want_spam" -gt 20 ] &&
  [ "$want_keys" -gt 5 ] ||
  notok "the model: out=$want_out duplicate=$want_dup spam=$want_spam keys=$want_keys"

# -- the broker and the topics ------------------------------------------------

t0=$SECONDS
bs=$("$KAFKA" start --dir "$K" --owner $$ 2>"$T/kafka.err") ||
  { cat "$T/kafka.err"; notok "scripts/kafka start: a 1-node broker"; }
ok "a 1-node Apache Kafka at $bs in $((SECONDS - t0)) s"
for t in in out rej; do
  check "topic $t created (3 partitions) with kafka-topics" \
    "$KAFKA" topic create "$t" --partitions 3 --dir "$K" 2>"$T/topic.err"
done

# -- the input ------------------------------------------------------------------

perr=$(kafka_tool console-producer --topic in \
        --property parse.headers=true --property parse.key=true --property key.separator='|' \
        --producer-property acks=all --producer-property max.block.ms=30000 \
        <"$T/input.txt" 2>&1 >/dev/null)
if [ $? -ne 0 ] || grep -q 'Error when sending' <<<"$perr"; then
  printf '%s\n' "$perr" | sed 's/^/# /'
  notok "$N records produced to in"
fi
in_end=$(end_sum in)
check "$N records produced to in (its end offsets add up to ${in_end:-?})" test "$in_end" = "$N"

# Where each record landed in `in`: SEQ -> in:P:O, for bloomstage-src.
read_topic in "$N" >"$T/in.read"
check "all $N records of in read back" test "$(wc -l <"$T/in.read")" = "$N"
awk -F'\t' '{ sub(/^seq:/, "", $3); print $3, "in:" $1 ":" $2 }' "$T/in.read" | sort -n >"$T/src.txt"

# The records expected in out and rej, as the console consumer prints them
# (HEADERS KEY VALUE) without the partition and offset.
join -j 1 <(sort -k1,1 "$T/model.txt") <(sort -k1,1 "$T/src.txt") |
  awk 'NR == FNR { split($0, a, "\t"); sub(/^seq:/, "", a[1]); split(a[2], kv, "|")
                   value[a[1]] = substr(a[2], length(kv[1]) + 2); next }
       { src = $NF
         h = "seq:" $1 ",bloomstage-src:" src
         if ($3 == "rej") h = h ",bloomstage-reason:" $4
         print h "\t" $2 "\t" value[$1] > (T "/want-" $3 ".txt")
       }' T="$T" "$T/input.txt" -
sort -o "$T/want-out.txt" "$T/want-out.txt"
sort -o "$T/want-rej.txt" "$T/want-rej.txt"
[ "$(wc -l <"$T/want-out.txt")" = "$want_out" ] && [ "$(wc -l <"$T/want-rej.txt")" = "$want_rej" ] ||
  notok "the expected records: $(wc -l <"$T/want-out.txt") out, $(wc -l <"$T/want-rej.txt") rej; want $want_out and $want_rej"

# -- the stage -------------------------------------------------------------------

cat >"$T/stage.conf" <<EOF
# test_stage_kafka.sh: the stage against a real broker
input.topics=in
output.topic=out
rejected.topic=rej
kafka.bootstrap.servers=$bs
consumer.group.id=$GROUP
checkpoint.dir=$T/ckpt
checkpoint.interval.ms=500
dedup.key=key
blocklist.spam.path=$repo/config/spam-senders.txt
blocklist.spam.key=json:/from
blocklist.keys.path=$T/keys.txt
log.stats.interval.ms=0
EOF
t0=$SECONDS
"$BIN" run -c "$T/stage.conf" </dev/null >"$T/stage.out" 2>"$T/stage.err" &
stage_pid=$!

# Until out and rej hold as many records as went in (bounded).
deadline=$((SECONDS + 180))
while :; do
  kill -0 "$stage_pid" 2>/dev/null || {
    wait "$stage_pid"
    notok "the stage exited ($?) before it had processed the input"
  }
  o=$(end_sum out) || o=?
  r=$(end_sum rej) || r=?
  [ "$o" = "$want_out" ] && [ "$r" = "$want_rej" ] && break
  if [ "$o" != ? ] && [ "$r" != ? ] && [ $((o + r)) -ge "$N" ]; then
    break # more than expected: the checks below say what
  fi
  ((SECONDS < deadline)) ||
    notok "after 180 s out holds $o records (want $want_out), rej $r (want $want_rej)"
  sleep 1
done
ok "the stage processed the input in $((SECONDS - t0)) s (out $o, rej $r)"

kill -TERM "$stage_pid"
deadline=$((SECONDS + 60))
while kill -0 "$stage_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
if kill -0 "$stage_pid" 2>/dev/null; then
  kill -KILL "$stage_pid"
  wait "$stage_pid"
  stage_pid=""
  notok "the stage still ran 60 s after SIGTERM (killed)"
fi
wait "$stage_pid"
rc=$?
stage_pid=""
check "the stage exits 0 after SIGTERM (exit $rc)" test "$rc" = 0
check "no sanitizer report on the stage's stderr" \
  bash -c '! grep -qE "ERROR: (Address|Leak)Sanitizer|runtime error:" "$0"' "$T/stage.err"
check "exactly_once by transactions (the start-up line says so)" \
  grep -qF 'msg="exactly_once method" method=transactions' "$T/stage.err"
# -- what is in out and rej --------------------------------------------------------

# The stage writes them in transactions (exactly_once.method=auto on a real
# broker): each commit also takes an offset per partition for its marker,
# so the end offsets add up to more than the records; one record more than
# expected is asked for, and must not come.
for t in out rej; do
  want=$(wc -l <"$T/want-$t.txt")
  end=$(end_sum "$t")
  check "$t's end offsets add up to at least $want (${end:-?}, with the transaction markers)" \
    test "${end:-0}" -ge "$want"
  read_topic "$t" "$((want + 1))" 5000 | cut -f 3- | sort >"$T/got-$t.txt"
  # A loaded machine can spend the first 5 s on the console consumer's
  # group join: a short read is made again, waiting 60 s for each record
  # (so that a missing one still ends it, and one too many still shows).
  if (($(wc -l <"$T/got-$t.txt") < want)); then
    echo "# $t: $(wc -l <"$T/got-$t.txt") of $want records read in 5 s; read again, waiting 60 s"
    read_topic "$t" "$((want + 1))" 60000 | cut -f 3- | sort >"$T/got-$t.txt"
  fi
  check "$t holds $want records at read_committed ($(wc -l <"$T/got-$t.txt")): no record more or less" \
    test "$(wc -l <"$T/got-$t.txt")" = "$want"
  if diff -u "$T/want-$t.txt" "$T/got-$t.txt" >"$T/diff-$t.txt"; then
    ok "$t holds exactly the $want expected records (headers, key, value)"
  else
    echo "# --- $t: - expected, + read (HEADERS KEY VALUE), first 40 lines of the diff"
    head -n 40 "$T/diff-$t.txt" | sed 's/^/# /'
    notok "$t does not hold exactly the expected records"
  fi
done

stopped=$(grep -F ' msg=stopped ' "$T/stage.err" | tail -n 1)
want_line="records_in=$N records_out=$want_out duplicates=$want_dup blocked=$((want_spam + want_keys)) missing_key=0"
check "the stage's stopped line counts $want_line (${stopped:-no stopped line})" \
  grep -qF "$want_line" <<<"$stopped"

# -- the group's committed offsets ---------------------------------------------

groups=$(kafka_tool consumer-groups --describe --group "$GROUP" 2>&1)
# GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
committed=$(awk -v g="$GROUP" '$1 == g && $2 == "in" { print "in:" $3 ":" $4 }' <<<"$groups" | sort)
ends=$(end_offsets in | sort)
if [ -n "$committed" ] && [ "$committed" = "$ends" ]; then
  ok "the group's committed offsets on in equal its end offsets ($(echo $ends))"
else
  echo "# consumer-groups --describe --group $GROUP:"
  sed 's/^/# /' <<<"$groups"
  echo "# end offsets of in: $(echo $ends)"
  notok "the group's committed offsets on in are not its end offsets"
fi

check "scripts/kafka stop" "$KAFKA" stop --dir "$K" 2>/dev/null
tap_done
