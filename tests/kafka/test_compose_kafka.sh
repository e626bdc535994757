#!/usr/bin/env bash
# test_compose_kafka.sh -- the compose stack's own configuration, run
# without Docker against a real Apache Kafka (one node, scripts/kafka):
#
#   bash tests/kafka/test_compose_kafka.sh path/to/bloomstage [path/to/scripts/kafka]
#
# Everything is read from docker-compose.yml, not restated here:
#   - the `topics` service's command (its `- |` block) is run as it is,
#     with /opt/kafka/bin/kafka-topics.sh being `scripts/kafka tool topics`
#     and kafka:9092 the test broker (compose's $$ unescaped to $);
#   - the `bloomstage` service's `environment:` block is parsed by the small
#     parser of tests/lib/compose.sh (KEY: VALUE lines, quotes stripped;
#     anything else in the block fails the test) and given to `bloomstage
#     run -c config/bloomstage.conf` (the image's CMD; config/bloomstage.conf is
#     what the Dockerfile copies there) on top of the Dockerfile's own ENV.
#     What only a container has is translated, and nothing else: a value
#     under a volume's mount point is moved to the volume's host side (the
#     bind mount ./config/spam-senders.txt, the named volume `checkpoints`
#     as a directory of the test), kafka:9092 becomes the test broker, and
#     the metrics port a free one on 127.0.0.1 (the container's 9464 would
#     be the host's, published by `ports:`; a test takes no fixed port);
#   - the `demo-producer` service's command is run as it is, with
#     kafka-console-producer.sh being `scripts/kafka tool console-producer`
#     and /spam-senders.txt the repository's config/spam-senders.txt; what
#     it produced is kept (a tee) for the model.
# Then: events-unique holds exactly one record per event id whose sender is
# on no list, events-rejected every other record (reason duplicate or
# blocklist:spam, as the model says), /metrics counts the same and /ready
# answers 200 `ready`; SIGTERM: exit 0.  Prints `ok - ...` / `not ok - ...`;
# every wait bounded; the stage and the broker stopped on exit.
KT_NAME=bs-compose-kafka
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../lib/compose.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
kt_bin "${1:?usage: test_compose_kafka.sh path/to/bloomstage [path/to/scripts/kafka]}"
KAFKA=${2:-$KAFKA}
COMPOSE=${COMPOSE_FILE_UNDER_TEST:-$repo/docker-compose.yml}
K=$T/kafka

# -- docker-compose.yml, read (tests/lib/compose.sh) ---------------------------

[ -r "$COMPOSE" ] || notok "$COMPOSE: not readable"
service_env bloomstage >"$T/env.raw" || notok "the bloomstage service's environment: a line the parser does not understand: $(grep '^BAD' "$T/env.raw")"
grep -q '^BLOOMSTAGE_INPUT_TOPICS=' "$T/env.raw" || notok "no BLOOMSTAGE_INPUT_TOPICS in the bloomstage service's environment"
ok "docker-compose.yml: the bloomstage service sets $(wc -l <"$T/env.raw") BLOOMSTAGE_* variables"
service_command topics >"$T/topics.sh"
grep -q 'kafka-topics.sh' "$T/topics.sh" || notok "the topics service's command does not run kafka-topics.sh"
service_command demo-producer >"$T/producer.sh"
grep -q 'kafka-console-producer.sh' "$T/producer.sh" || notok "the demo-producer's command does not run kafka-console-producer.sh"

# -- the broker, and the topics as the init service makes them ----------------

t0=$SECONDS
bs=$("$KAFKA" start --dir "$K" --owner $$ 2>"$T/kafka.err") ||
  { cat "$T/kafka.err"; notok "scripts/kafka start: a 1-node broker"; }
ok "a 1-node Apache Kafka at $bs in $((SECONDS - t0)) s"
mkdir -p "$T/bin"
cat >"$T/bin/kafka-topics.sh" <<EOF
#!/usr/bin/env bash
exec "$KAFKA" tool topics "\$@" --dir "$K"
EOF
cat >"$T/bin/kafka-console-producer.sh" <<EOF
#!/usr/bin/env bash
tee "$T/input.txt" | "$KAFKA" tool console-producer "\$@" --dir "$K"
EOF
chmod +x "$T/bin/"*.sh
# The container paths and names of the commands, and compose's $$ escape.
fix() {
  sed -e "s#/opt/kafka/bin/#$T/bin/#g" -e "s#kafka:9092#$bs#g" \
      -e "s#/spam-senders.txt#$repo/config/spam-senders.txt#g" -e 's/\$\$/$/g'
}
fix <"$T/topics.sh" >"$T/topics.run"
sh "$T/topics.run" >"$T/topics.out" 2>&1 ||
  { sed 's/^/# /' "$T/topics.out"; notok "the topics service's command"; }
desc=$("$KAFKA" tool topics --describe --dir "$K" 2>/dev/null)
for t in events events-unique events-rejected; do
  grep -q "Topic: $t	.*PartitionCount: 3" <<<"$desc" ||
    { echo "$desc" | sed 's/^/# /'; notok "topic $t with 3 partitions after the topics service's command"; }
done
ok "the topics service's command made events, events-unique, events-rejected (3 partitions each)"

# -- the stage, configured as the compose file says ----------------------------

# The Dockerfile's ENV first, then the service's environment on top.
sed -n '/^ENV /,/[^\\]$/p' "$repo/Dockerfile" | sed 's/^ENV //; s/\\$//' |
  tr ' ' '\n' | grep '^BLOOMSTAGE_' >"$T/env.docker"
grep -q . "$T/env.docker" || notok "no BLOOMSTAGE_* ENV in the Dockerfile"
cat "$T/env.docker" "$T/env.raw" >"$T/env.all"
mounts=$(service_volumes bloomstage)
envs=()
while IFS= read -r kv; do
  k=${kv%%=*} v=${kv#*=}
  while IFS='|' read -r host cont; do
    [ -n "$cont" ] || continue
    case $host in ./*) host=$repo/${host#./} ;; *) host=$T/volumes/$host; mkdir -p "$host" ;; esac
    case $v in "$cont"|"$cont"/*) v=$host${v#"$cont"} ;; esac
  done <<<"$mounts"
  case $k in
    BLOOMSTAGE_KAFKA_BOOTSTRAP_SERVERS) v=$bs ;;
    BLOOMSTAGE_METRICS_LISTEN) v=127.0.0.1:0 ;;
  esac
  envs+=("$k=$v")
done <"$T/env.all"
printf '%s\n' "${envs[@]}" | sed 's/^/# /'
for kv in "${envs[@]}"; do
  case $kv in *=/etc/bloomstage/* | *=/var/lib/* | *kafka:9092*) notok "$kv: a container path or host left untranslated" ;; esac
done
env "${envs[@]}" "$BIN" run -c "$repo/config/bloomstage.conf" </dev/null >"$T/stage.out" 2>"$T/stage.err" &
stage_pid=$!

port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*msg="metrics listening".* port=\([0-9]*\).*/\1/p' "$T/stage.err" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$stage_pid" 2>/dev/null || notok "the stage exited before listening"
  sleep 0.2
done
[ -n "$port" ] || notok "no 'metrics listening' line within 60 s"
ok "the stage runs with the compose environment; metrics on 127.0.0.1:$port"

# -- the demo producer's stream ------------------------------------------------

fix <"$T/producer.sh" >"$T/producer.run"
sh "$T/producer.run" >"$T/producer.out" 2>&1 ||
  { sed 's/^/# /' "$T/producer.out"; notok "the demo-producer's command"; }
grep -q 'Error when sending' "$T/producer.out" && notok "the console producer: $(grep -m1 'Error when sending' "$T/producer.out")"
N=$(wc -l <"$T/input.txt")
ok "the demo-producer's command produced $N records to events"

# The model (tests/lib/compose.sh): what each record must become.
compose_model "$repo/config/spam-senders.txt" "$T/input.txt" ||
  notok "the model: out $want_out, duplicate $want_dup, spam $want_spam"

# The stage is done when its group has committed every input offset (the
# console producer writes no transaction markers, so the input's end is N);
# then both outputs are read as downstream reads them, read_committed, in
# full.  Their end offsets are no count of records: with transactions (the
# default on a real broker) each commit adds a marker to every partition
# it wrote.
group=bloomstage
for kv in "${envs[@]}"; do
  [[ $kv == BLOOMSTAGE_CONSUMER_GROUP_ID=* ]] && group=${kv#*=}
done
committed_sum() {
  "$KAFKA" tool consumer-groups --describe --group "$group" --dir "$K" 2>/dev/null |
    awk '$2 == "events" && $4 ~ /^[0-9]+$/ { s += $4; n++ } END { if (!n) exit 1; print s }'
}
deadline=$((SECONDS + 240))
while :; do
  kill -0 "$stage_pid" 2>/dev/null || notok "the stage exited while processing"
  c=$(committed_sum) || c=?
  [ "$c" = "$N" ] && break
  ((SECONDS < deadline)) || notok "after 240 s group $group has committed $c of the $N input offsets"
  sleep 1
done
ok "group $group committed all $N input offsets"

# Everything there: no --max-messages, the read ends 20 s after the last
# record.  HEADERS TAB KEY TAB VALUE: the key, and the reason of a rejected
# one.
read_topic() {
  "$KAFKA" tool console-consumer --topic "$1" --from-beginning \
    --timeout-ms 20000 --isolation-level read_committed --dir "$K" \
    --property print.key=true --property print.headers=true 2>"$T/read-$1.err"
}
read_topic events-unique | cut -f 2 | sort >"$T/got-out.txt"
read_topic events-rejected | rejected_with_reason >"$T/got-rej.txt"
o=$(wc -l <"$T/got-out.txt")
r=$(wc -l <"$T/got-rej.txt")
[ "$o" = "$want_out" ] && [ "$r" = "$want_rej" ] ||
  notok "events-unique holds $o records (want $want_out), events-rejected $r (want $want_rej), read_committed"
ok "events-unique holds $o records, events-rejected $r (read_committed)"
diff "$T/want-out.txt" "$T/got-out.txt" >"$T/diff-out.txt" ||
  { head -n 20 "$T/diff-out.txt" | sed 's/^/# /'; notok "events-unique is not one record per event id on no list"; }
ok "events-unique: exactly one record for each of the $want_out event ids on no list (read_committed)"
diff "$T/want-rej.txt" "$T/got-rej.txt" >"$T/diff-rej.txt" ||
  { head -n 20 "$T/diff-rej.txt" | sed 's/^/# /'; notok "events-rejected does not hold every other record with its reason"; }
ok "events-rejected: the $want_dup duplicates and $want_spam spam-sender records, each with its reason"

# -- /metrics and /ready ---------------------------------------------------------

metrics=$(curl -s -m 10 -w '\n%{http_code}' "http://127.0.0.1:$port/metrics")
[ "$(tail -n 1 <<<"$metrics")" = 200 ] || notok "/metrics: HTTP $(tail -n 1 <<<"$metrics")"
metrics_match "$metrics" "$N" ||
  notok "/metrics does not count in $N, out $want_out, duplicate $want_dup, spam $want_spam"
ok "/metrics: in $N, out $want_out, dropped duplicate $want_dup and blocklist spam $want_spam"
ready=$(curl -s -m 10 -w ' %{http_code}' "http://127.0.0.1:$port/ready")
[ "$ready" = "ready
 200" ] || notok "/ready answered '$ready', want 200 'ready'"
ok "/ready: 200 ready"

kill -TERM "$stage_pid"
deadline=$((SECONDS + 60))
while kill -0 "$stage_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
kill -0 "$stage_pid" 2>/dev/null && notok "the stage still runs 60 s after SIGTERM"
wait "$stage_pid"
rc=$?
stage_pid=""
[ "$rc" = 0 ] || notok "the stage exited $rc after SIGTERM"
ok "SIGTERM: the stage drained and exited 0"
ls "$T/volumes/checkpoints/"*.ckpt >/dev/null 2>&1 || notok "no checkpoint in the checkpoints volume's directory"
ok "checkpoints in the named volume's directory: $(ls "$T/volumes/checkpoints" | tr '\n' ' ')"
"$KAFKA" stop --dir "$K" 2>/dev/null
tap_done
