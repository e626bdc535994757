#!/usr/bin/env bash
# test_kafka_script.sh -- scripts/kafka itself, against the real broker it
# starts: one node starts on a free port, prints its bootstrap server,
# answers Kafka's own tools, creates a topic, refuses to auto-create one,
# round-trips records, and `stop` leaves no JVM; three nodes start with
# replication 3 and min ISR 2, one is stopped (the cluster still takes
# acks=all writes and serves reads) and started again (it rejoins every
# ISR), and `stop` leaves no JVM.
#
#   bash tests/kafka/test_kafka_script.sh [path/to/scripts/kafka]
#
# Prints `ok - ...` / `not ok - ...` per check and exits 1 if any failed (at
# the first failure: later checks depend on earlier ones).  Every wait is
# bounded; the clusters are stopped on exit however the test ends (a trap,
# and scripts/kafka's --owner watchdog if the test is killed).  Owned by the
# real-broker work (scripts/kafka).

KT_NAME=bs-kafka-script
here=$(cd "$(dirname "$0")" && pwd)
KAFKA=${1:-$here/../../scripts/kafka}
. "$here/lib.sh"

# JVMs whose command line names directory $1 (as scripts/kafka's nodes' do).
jvms_in() {
  local p c
  for p in /proc/[0-9]*; do
    c=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ $c == *java*"$1/"* ]] && echo "${p#/proc/}"
  done
  return 0
}

no_jvm_left() {
  local left
  left=$(jvms_in "$1")
  [ -z "$left" ] || { echo "# still running in $1: $left"; return 1; }
}

# Topics tool on cluster $1.
topics() { local d=$1; shift; "$KAFKA" tool topics --dir "$d" "$@"; }

# Produces lines "key|value" read from stdin to topic $2 of cluster $1 with
# acks=all; fails if a record was not delivered (the console producer logs
# that and still exits 0), printing its stderr.
produce() {
  local err
  err=$("$KAFKA" tool console-producer --dir "$1" --topic "$2" \
    --property parse.key=true --property key.separator='|' \
    --producer-property acks=all --producer-property delivery.timeout.ms=30000 \
    --producer-property request.timeout.ms=10000 --producer-property max.block.ms=30000 2>&1 >/dev/null)
  local rc=$?
  if [ $rc -ne 0 ] || grep -q 'Error when sending' <<<"$err"; then
    printf '%s\n' "$err" | sed 's/^/# /'
    return 1
  fi
}

# Prints the values of the first $3 records of topic $2 of cluster $1.
consume() {
  "$KAFKA" tool console-consumer --dir "$1" --topic "$2" --from-beginning \
    --max-messages "$3" --timeout-ms 30000 2>/dev/null
}

# Waits (bounded) until every partition of topic $2 on cluster $1 has $3
# replicas in sync.
wait_isr() {
  local d=$1 t=$2 want=$3 deadline=$((SECONDS + 90)) out
  while :; do
    out=$(topics "$d" --describe --topic "$t" 2>/dev/null)
    awk -v w="$want" '/Partition: [0-9]+/ { seen = 1
        for (i = 1; i <= NF; i++) if ($i == "Isr:" && split($(i + 1), a, ",") != w) bad = 1 }
        END { exit !(seen && !bad) }' <<<"$out" && return 0
    ((SECONDS < deadline)) || { echo "# ISRs of $t after 90 s:"; sed 's/^/# /' <<<"$out"; return 1; }
    sleep 1
  done
}

# -- one node -------------------------------------------------------------------

d=$T/one
start=$SECONDS
out=$("$KAFKA" start --dir "$d" --owner $$ 2>"$T/one.err")
rc=$?
[ $rc -eq 0 ] || { cat "$T/one.err"; notok "1 node: start exits 0 (exit $rc)"; }
ok "1 node: start exits 0 in $((SECONDS - start)) s"
check "1 node: stdout is one line 127.0.0.1:PORT ('$out')" \
  grep -qxE '127\.0\.0\.1:[0-9]+' <<<"$out"
check "1 node: DIR/bootstrap holds the same" test "$(cat "$d/bootstrap")" = "$out"
port=${out#127.0.0.1:}
check "1 node: something listens on $out" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
check "1 node: status reports it answering" \
  bash -c '"$0" status --dir "$1" | grep -qx "brokers answering: 1 of 1"' "$KAFKA" "$d"
check "1 node: a second start on the same dir is refused" \
  bash -c '! "$0" start --dir "$1" >/dev/null 2>&1' "$KAFKA" "$d"

check "1 node: topic create t1 --partitions 3" \
  "$KAFKA" topic create t1 --partitions 3 --dir "$d"
desc=$(topics "$d" --describe --topic t1 2>&1)
check "1 node: t1 has 3 partitions, replication 1, min ISR 1" \
  grep -qE 'PartitionCount: 3[[:space:]]+ReplicationFactor: 1[[:space:]]+Configs: .*min\.insync\.replicas=1' <<<"$desc"

# auto.create.topics.enable=false: producing to a missing topic fails (the
# console producer logs it and exits 0 all the same) and creates nothing.
err=$(printf 'k|v\n' | "$KAFKA" tool console-producer --dir "$d" --topic nosuch \
        --property parse.key=true --property key.separator='|' \
        --producer-property max.block.ms=4000 2>&1 >/dev/null)
check "1 node: a produce to a missing topic fails: not present in metadata" \
  grep -q 'Topic nosuch not present in metadata' <<<"$err"
check "1 node: and creates no topic (auto-create is off)" \
  bash -c '! "$0" tool topics --dir "$1" --list 2>/dev/null | grep -qx nosuch' "$KAFKA" "$d"

check "1 node: produce 3 records to t1" produce "$d" t1 < <(printf 'a|1\nb|2\nc|3\n')
got=$(consume "$d" t1 3 | sort | tr '\n' ' ')
check "1 node: the 3 records read back ('$got')" test "$got" = "1 2 3 "

check "1 node: stop exits 0" "$KAFKA" stop --dir "$d"
check "1 node: no JVM left" no_jvm_left "$d"
check "1 node: the port is closed" bash -c "! exec 3<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
check "1 node: status says stopped" \
  bash -c '! "$0" status --dir "$1" >/dev/null 2>&1' "$KAFKA" "$d"

# -- three nodes -----------------------------------------------------------------

d=$T/three
start=$SECONDS
out=$("$KAFKA" start --nodes 3 --dir "$d" --owner $$ 2>"$T/three.err")
rc=$?
[ $rc -eq 0 ] || { cat "$T/three.err"; notok "3 nodes: start exits 0 (exit $rc)"; }
ok "3 nodes: start exits 0 in $((SECONDS - start)) s"
check "3 nodes: stdout lists 3 distinct loopback ports ('$out')" bash -c '
  grep -qxE "127\.0\.0\.1:[0-9]+(,127\.0\.0\.1:[0-9]+){2}" <<<"$0" &&
  [ "$(tr , "\n" <<<"$0" | sort -u | wc -l)" = 3 ]' "$out"
check "3 nodes: topic create r --partitions 3" \
  "$KAFKA" topic create r --partitions 3 --dir "$d"
desc=$(topics "$d" --describe --topic r 2>&1)
check "3 nodes: r has replication 3, min ISR 2 by default" \
  grep -qE 'PartitionCount: 3[[:space:]]+ReplicationFactor: 3[[:space:]]+Configs: .*min\.insync\.replicas=2' <<<"$desc"
check "3 nodes: every ISR of r is 3" wait_isr "$d" r 3
check "3 nodes: produce 10 records, acks=all" produce "$d" r < <(seq 1 10 | sed 's/.*/k&|&/')

check "3 nodes: stop-node 2" "$KAFKA" stop-node 2 --dir "$d"
check "3 nodes: node 2's JVM is gone" no_jvm_left "$d/node2"
check "3 nodes: status reports 2 of 3 answering" \
  bash -c '"$0" status --dir "$1" | grep -qx "brokers answering: 2 of 3"' "$KAFKA" "$d"
check "3 nodes, node 2 down: 10 more records with acks=all go through" \
  produce "$d" r < <(seq 11 20 | sed 's/.*/k&|&/')
got=$(consume "$d" r 20 | sort -n | tr '\n' ' ')
check "3 nodes, node 2 down: the 20 records read back" test "$got" = "$(seq 1 20 | tr '\n' ' ')"

check "3 nodes: start-node 2" "$KAFKA" start-node 2 --dir "$d"
check "3 nodes: node 2 is back in every ISR of r" wait_isr "$d" r 3
check "3 nodes: produce 10 more after the restart" produce "$d" r < <(seq 21 30 | sed 's/.*/k&|&/')
got=$(consume "$d" r 30 | sort -n | tr '\n' ' ')
check "3 nodes: the 30 records read back" test "$got" = "$(seq 1 30 | tr '\n' ' ')"

check "3 nodes: stop exits 0" "$KAFKA" stop --dir "$d"
check "3 nodes: no JVM left" no_jvm_left "$d"
check "3 nodes: no watchdog left" bash -c '! [ -e "$0/watchdog.pid" ]' "$d"

tap_done
