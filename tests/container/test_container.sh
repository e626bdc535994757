#!/usr/bin/env bash
# test_container.sh -- the image and the compose stack, built and run with
# Docker as a user runs them:
#
#   bash tests/container/test_container.sh
#
# First `scripts/container setup` (a daemon, the base and Kafka images,
# each made once and kept in Docker's image store) and `scripts/container
# build ctest` (the image from the working tree, tagged bloomstage:ctest):
# where either fails the test fails with its reason; nothing is skipped.
# Then, on that image:
#   - `bloomstage --version` and `bloomstage demo` in it; no compiler in it;
#   - docker-compose.yml brought up under a project name of its own
#     (bs-ctest-PID, everything removed at the end, pass or fail), the
#     HEALTHCHECK healthy, /ready 200; user, read-only root file system
#     and capabilities as docker inspect reports them;
#   - the demo-producer service run, the outputs read at read_committed
#     and checked against the model of the producer's stream
#     (tests/lib/compose.sh, shared with tests/kafka/test_compose_kafka.sh):
#     every unique record not from a spam sender once in events-unique,
#     every other one in events-rejected with its reason; /metrics counts
#     the same;
#   - `docker-compose stop bloomstage` drains within the grace period and
#     exits 0; `start` on the same volume and the producer run again: the
#     replay adds nothing to events-unique;
#   - the producer run a third time with new event ids (its command, the
#     ids renamed), `docker kill` (SIGKILL) mid-stream, `docker start`:
#     the restart's time to its first record is printed (the static group
#     member id from the hostname gives the partitions back at once), and
#     the outputs are still exactly the model of all three streams;
#   - bad input: a config path with nothing mounted there, a checkpoint
#     volume the image's user cannot write, a BLOOMSTAGE_* variable naming
#     no key: exit non-zero with a line naming the cause; with the restart
#     policy, the bad variable stops after its tries instead of spinning.
# Prints TAP (`ok - ...`, the tally); the first failure ends the test with
# the services' last log lines.
. "$(dirname "$0")/../lib/tap.sh"
. "$(dirname "$0")/../lib/compose.sh"
repo=$(cd "$(dirname "$0")/../.." && pwd)
COMPOSE=$repo/docker-compose.yml
TAP_STOP=1
tap_scratch bs-container
P=bs-ctest-$$
IMAGE=bloomstage:ctest
GROUP=bloomstage
export BLOOMSTAGE_IMAGE=$IMAGE
# The published metrics port: a free one (the tests read the container's
# own address; the port only must not collide).
BLOOMSTAGE_METRICS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export BLOOMSTAGE_METRICS_PORT
t_start=$SECONDS

dc() { docker-compose -p "$P" -f "$COMPOSE" --project-directory "$repo" "$@"; }

tap_cleanup() {
  docker ps -aq --filter "label=com.docker.compose.project=$P" | xargs -r docker rm -f >/dev/null 2>&1
  dc down -v --remove-orphans >/dev/null 2>&1
  docker volume ls -q --filter "name=${P}_" | xargs -r docker volume rm >/dev/null 2>&1
  return 0
}
tap_stopping() {
  local s
  for s in bloomstage kafka; do
    echo "# --- the last lines of $s"
    dc logs --no-color --tail 25 "$s" 2>&1 | sed 's/^/# /'
  done
}

# -- Docker, the images ---------------------------------------------------------

t0=$SECONDS
"$repo/scripts/container" setup >"$T/setup.out" 2>&1 ||
  { diag "$T/setup.out"; notok "scripts/container setup: $(grep 'scripts/container:' "$T/setup.out" | tail -n 1)"; }
ok "Docker answers; $("$repo/scripts/container" which | tr '\n' ';' | sed 's/;$//; s/;/; /g') (set-up: $((SECONDS - t0)) s)"
t0=$SECONDS
"$repo/scripts/container" build ctest >"$T/build.out" 2>&1 ||
  { diag "$T/build.out"; notok "scripts/container build: $(tail -n 1 "$T/build.out")"; }
size=$(docker image inspect -f '{{ .Size }}' "$IMAGE")
ok "image $IMAGE built from the working tree in $((SECONDS - t0)) s: $((size / 1000000)) MB"

docker run --rm "$IMAGE" --version >"$T/version.out" 2>&1 ||
  { diag "$T/version.out"; notok "bloomstage --version in the image"; }
grep -q '^bloomstage [0-9]' "$T/version.out" || { diag "$T/version.out"; notok "bloomstage --version printed no version"; }
ok "in the image: $(head -n 1 "$T/version.out")"
timeout 120 docker run --rm --read-only --tmpfs /tmp "$IMAGE" demo >"$T/demo.out" 2>"$T/demo.err" ||
  { diag "$T/demo.err"; notok "bloomstage demo in the image"; }
diag "$T/demo.out"
ok "bloomstage demo runs in the image (read-only root, a tmpfs /tmp)"
tools=$(docker run --rm --entrypoint sh "$IMAGE" -c \
  'command -v cc gcc c++ cmake make apt-get >/dev/null 2>&1 && command -v cc gcc c++ cmake make; ls /var/lib/apt/lists /var/cache/apt/archives 2>/dev/null | grep -v -e partial -e lock -e "^/" -e "^$"')
[ -z "$tools" ] || notok "the runtime image holds build tools or package lists: $tools"
ok "the runtime image holds no compiler, cmake, make, package list or download"

# -- the producer's streams and their model --------------------------------------

# The demo-producer service's command with its console producer replaced by
# `cat`: the stream it sends, generated here as it is there.  $1: a sed
# script applied to the command (the third stream renames the ids).
stream() {
  service_command demo-producer | sed -e "s#/spam-senders.txt#$repo/config/spam-senders.txt#g" \
    -e 's/\$\$/$/g' -e "${1:-}" | awk '/kafka-console-producer.sh/ { print "cat"; skip = /\\$/; next }
      skip { skip = /\\$/; next } { print }' >"$T/stream.sh"
  grep -q '^cat$' "$T/stream.sh" || notok "the demo-producer's command: no kafka-console-producer.sh to replace"
  sh "$T/stream.sh"
}
stream >"$T/input1.txt" || notok "the demo-producer's command, run with cat as its producer"
N1=$(wc -l <"$T/input1.txt")

kafka_tool() { docker exec "$(dc ps -q kafka)" "/opt/kafka/bin/kafka-$1.sh" --bootstrap-server kafka:9092 "${@:2}"; }
stage_id() { dc ps -q bloomstage; }
stage_ip() { docker inspect -f '{{ range .NetworkSettings.Networks }}{{ .IPAddress }}{{ end }}' "$(stage_id)"; }
# $stage_addr, when set, spares the docker-compose lookup in a tight loop.
http() { curl -s -m 5 -w '\n%{http_code}' "http://${stage_addr:-$(stage_ip)}:9464/$1"; }
metric() { awk -v s="$1" '$1 == s { print $2 }' <<<"$metrics"; }
state() { docker inspect -f "$1" "$(stage_id)"; }

# Waits until group $GROUP has committed $1 input offsets (the console
# producer writes no markers: the input's end is its record count).
committed() {
  local want=$1 c deadline=$((SECONDS + 180))
  while :; do
    c=$(kafka_tool consumer-groups --describe --group "$GROUP" 2>/dev/null |
      awk '$2 == "events" && $4 ~ /^[0-9]+$/ { s += $4; n++ } END { if (n) print s }')
    [ "$c" = "$want" ] && return 0
    ((SECONDS < deadline)) || notok "after 180 s group $GROUP has committed ${c:-no} of $want input offsets"
    [ "$(state '{{ .State.Running }}')" = true ] || notok "the stage exited while processing"
    sleep 2
  done
}
# Both outputs read to their end at read_committed, against the model of
# $T/input.txt (every stream sent so far).
check_outputs() {
  compose_model "$repo/config/spam-senders.txt" "$T/input.txt" || notok "the model: out $want_out, duplicate $want_dup, spam $want_spam"
  local o r try wait_ms
  # Both at once; each read ends 20 s after its last record, or 20 s after
  # its start with none (a loaded machine can spend that on the JVM and the
  # group join): a read short of the model is tried again, up to 3 times,
  # the later ones waiting 60 s (a machine at load 40 took more than 20 s
  # to start a console consumer's fetches twice in a row).
  for try in 1 2 3; do
    wait_ms=$((try == 1 ? 20000 : 60000))
    kafka_tool console-consumer --topic events-unique --from-beginning --timeout-ms $wait_ms \
      --isolation-level read_committed --property print.key=true 2>"$T/read-out.err" | cut -f 1 | sort >"$T/got-out.txt" &
    kafka_tool console-consumer --topic events-rejected --from-beginning --timeout-ms $wait_ms \
      --isolation-level read_committed --property print.key=true --property print.headers=true 2>"$T/read-rej.err" |
      rejected_with_reason >"$T/got-rej.txt" &
    wait
    o=$(wc -l <"$T/got-out.txt") r=$(wc -l <"$T/got-rej.txt")
    ((o < want_out || r < want_rej)) || break
    echo "# read $try: $o and $r records, short of $want_out and $want_rej; again"
  done
  diff "$T/want-out.txt" "$T/got-out.txt" >"$T/diff-out.txt" ||
    { head -n 10 "$T/diff-out.txt" | sed 's/^/# /'; diag "$T/read-out.err"; notok "$1: events-unique holds $o records, want exactly one for each of the $want_out event ids on no list"; }
  diff "$T/want-rej.txt" "$T/got-rej.txt" >"$T/diff-rej.txt" ||
    { head -n 10 "$T/diff-rej.txt" | sed 's/^/# /'; diag "$T/read-rej.err"; notok "$1: events-rejected holds $r records, want the $want_dup duplicates and $want_spam spam-sender records with their reasons"; }
  ok "$1: events-unique exactly one record for each of the $want_out unique ids on no list, events-rejected the $want_dup duplicates and $want_spam spam records with their reasons (read_committed)"
}
# Runs the demo-producer service (its command as it is, or with sed script
# $1 applied) and appends what it sent to $T/input.txt.
produce() {
  if [ -z "${1:-}" ]; then
    dc run --rm --no-deps -T demo-producer >"$T/producer.out" 2>&1 ||
      { diag "$T/producer.out"; notok "the demo-producer service"; }
    cat "$T/input1.txt" >>"$T/input.txt"
  else
    service_command demo-producer | sed -e 's/\$\$/$/g' -e "$1" >"$T/producer.sh"
    dc run --rm --no-deps -T demo-producer "$(cat "$T/producer.sh")" >"$T/producer.out" 2>&1 ||
      { diag "$T/producer.out"; notok "the demo-producer service with ${1}"; }
    stream "$1" >>"$T/input.txt"
  fi
  grep -q 'Error when sending' "$T/producer.out" && notok "the console producer: $(grep -m1 'Error when sending' "$T/producer.out")"
  return 0
}

# -- the stack up ---------------------------------------------------------------

t0=$SECONDS
dc up -d --no-build bloomstage >"$T/up.out" 2>&1 || { diag "$T/up.out"; notok "docker-compose up bloomstage"; }
t_up=$((SECONDS - t0))
deadline=$((SECONDS + 120))
while [ "$(state '{{ .State.Health.Status }}')" != healthy ]; do
  ((SECONDS < deadline)) || notok "the stage's HEALTHCHECK: $(state '{{ .State.Health.Status }}') 120 s after start"
  sleep 0.5
done
ok "docker-compose up: kafka healthy, topics made, bloomstage started in $t_up s and healthy after $((SECONDS - t0)) s"
# Healthy is the liveness probe's (/healthz); ready comes once start-up is
# done, which on a broker that has just started can take a while more
# (its transaction coordinator answers NOT_COORDINATOR until it has
# loaded): /ready is polled, as a readiness probe does.
t0=$SECONDS
deadline=$((SECONDS + 120))
ready=$(http ready)
until [ "$(head -n 1 <<<"$ready")" = ready ] && [ "$(tail -n 1 <<<"$ready")" = 200 ]; do
  ((SECONDS < deadline)) || notok "/ready answered '$ready' 120 s after healthy, want 200 'ready'"
  sleep 0.5
  ready=$(http ready || true)
done
ok "/ready: 200 ready ($((SECONDS - t0)) s after healthy)"

user=$(state '{{ .Config.User }}') ro=$(state '{{ .HostConfig.ReadonlyRootfs }}')
add=$(state '{{ .HostConfig.CapAdd }}') drop=$(state '{{ .HostConfig.CapDrop }}') priv=$(state '{{ .HostConfig.Privileged }}')
uid=$(docker exec "$(stage_id)" id -u)
[ "$user" = bloomstage ] && [ "$uid" != 0 ] && [ "$ro" = true ] && [ "$priv" = false ] &&
  [[ $add == "[]" || $add == "<no value>" ]] && [ "$drop" = "[ALL]" ] ||
  notok "docker inspect: user '$user' (uid $uid), read-only root $ro, privileged $priv, CapAdd $add, CapDrop $drop"
docker exec "$(stage_id)" sh -c 'touch /usr/local/bin/x' 2>/dev/null && notok "the root file system is writable"
docker exec "$(stage_id)" sh -c 'touch /var/lib/bloomstage/.w /tmp/.w && rm /var/lib/bloomstage/.w /tmp/.w' ||
  notok "the checkpoint volume or /tmp is not writable"
ok "runs as $user (uid $uid), read-only root file system (the volume and /tmp writable), no added capabilities (CapDrop $drop)"
member=$(docker exec "$(stage_id)" sh -c 'cat /proc/sys/kernel/hostname')
docker logs "$(stage_id)" 2>&1 | grep -q "transactional_id=bloomstage-$GROUP-$member\b" ||
  notok "the stage does not use the hostname $member as its static member id (no transactional id bloomstage-$GROUP-$member in its log)"
ok "the static group member id is the hostname, $member (the transactional id bloomstage-$GROUP-$member follows it)"

# -- one clean run: the model, /metrics ----------------------------------------

: >"$T/input.txt"
t0=$SECONDS
produce
committed "$N1"
ok "the demo producer's $N1 records sent and processed in $((SECONDS - t0)) s"
check_outputs "the demo stream"
metrics=$(http metrics)
[ "$(tail -n 1 <<<"$metrics")" = 200 ] || notok "/metrics: HTTP $(tail -n 1 <<<"$metrics")"
metrics_match "$metrics" "$N1" ||
  notok "/metrics does not count in $N1, out $want_out, duplicate $want_dup, spam $want_spam"
ok "/metrics: in $N1, out $want_out, dropped duplicate $want_dup and blocklist spam $want_spam"

# -- stop (drain) and start on the same volume: a replay adds nothing ----------

t0=$SECONDS
dc stop bloomstage >"$T/stop.out" 2>&1 || { diag "$T/stop.out"; notok "docker-compose stop bloomstage"; }
t_stop=$((SECONDS - t0))
rc=$(state '{{ .State.ExitCode }}')
[ "$rc" = 0 ] && ((t_stop < 30)) || notok "docker-compose stop: exit $rc after $t_stop s (want 0 within the 30 s grace period)"
docker run --rm -v "${P}_checkpoints:/ck" --entrypoint sh "$IMAGE" -c 'ls /ck/*.ckpt' >/dev/null 2>&1 ||
  notok "no checkpoint in the checkpoints volume after the drain"
ok "docker-compose stop bloomstage: drained and exited 0 in $t_stop s; checkpoints in the volume"
dc start bloomstage >"$T/start.out" 2>&1 || { diag "$T/start.out"; notok "docker-compose start bloomstage"; }
produce
committed "$((2 * N1))"
check_outputs "start on the same volume, the stream replayed"
metrics=$(http metrics)
[ "$(metric bloomstage_records_out_total)" = 0 ] ||
  notok "after the restart /metrics counts $(metric bloomstage_records_out_total) records out for a replay"
ok "the replay of $N1 already-seen records: none out, $(metric 'bloomstage_records_dropped_total{reason="duplicate"}') dropped as duplicates"

# -- docker kill mid-stream, docker start: still exactly once ---------------------

# The third stream: the producer's own command, its event ids renamed, so
# that the kill lands among records the stage has never seen, and its lines
# paced (100 each 0.1 s, about 24 s in all) so that it lands mid-stream.
# The stage's address is looked up once: on a loaded machine each
# docker-compose call takes seconds, and a poll that slow let the whole
# stream through before the kill.
n0=$(metric bloomstage_records_in_total)
stage_addr=$(stage_ip)
produce 's/evt-%06d/new-%06d/g; s#^\(/opt/kafka/bin/kafka-console-producer.sh\)#awk "{ print; fflush(); if (NR % 100 == 0) system(\\"sleep 0.1\\") }" | \1#' &
producer=$!
deadline=$((SECONDS + 120))
while :; do
  metrics=$(http metrics 2>/dev/null) || metrics=""
  n=$(($(metric bloomstage_records_in_total) - n0))
  [ "$n" -ge 3000 ] && break
  ((SECONDS < deadline)) || notok "the third stream: $n records in after 120 s"
  sleep 0.1
done
docker kill -s KILL "$(stage_id)" >/dev/null || notok "docker kill"
docker wait "$(stage_id)" >"$T/kill.rc" 2>&1
unset stage_addr # a started container may get another address
killed_at=$n
((n < N1)) || notok "the kill came after the third stream's $N1 records, not mid-stream"
ok "docker kill (SIGKILL) mid-stream, $n of $N1 records into the third stream; exit $(cat "$T/kill.rc")"
t0=$(date +%s.%N)
docker start "$(stage_id)" >/dev/null || notok "docker start"
first=""
while [ -z "$first" ]; do
  metrics=$(http metrics 2>/dev/null) || metrics=""
  n=$(metric bloomstage_records_in_total)
  [ "${n:-0}" -gt 0 ] && first=$(date +%s.%N)
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { exit !(b - a > 90) }' && notok "no record 90 s after docker start"
  [ -n "$first" ] || sleep 0.05
done
t_first=$(awk -v a="$t0" -v b="$first" 'BEGIN { printf "%.2f", b - a }')
echo "# restart to first record after docker kill + docker start: $t_first s (static member id $member)"
# Without the static member id the restarted member would join only once
# the killed one's session expired: librdkafka's session.timeout.ms,
# 45 s, which the stack keeps.  Anything under it shows the id spared
# that wait; how far under is the machine's (the container's start, the
# restore), not the stage's.
awk -v t="$t_first" 'BEGIN { exit !(t < 45) }' ||
  notok "restart to first record: $t_first s, not under the 45 s session timeout the static member id should spare"
# The figure is docker start's: the restart policy did not restart the
# killed container first (Docker counts a kill as a stop by hand).
[ "$(state '{{ .RestartCount }}')" = 0 ] || notok "the restart policy restarted the killed container before docker start"
ok "docker start after the kill: the first record after $t_first s (static member id)"
wait "$producer" || notok "the third stream's producer"
committed "$(wc -l <"$T/input.txt")"
check_outputs "killed with SIGKILL at $killed_at records and restarted"

# -- bad input: one line naming the cause, non-zero; no silent restart loop ---

# bad DESC WANT OVERRIDE [COMMAND...]: the bloomstage service with the
# compose file OVERRIDE on top (its environment or volumes replace the
# service's), run once (`docker-compose run`), must exit non-zero with one
# `bloomstage: ` line, holding WANT.
bad() {
  local desc=$1 want=$2 over=$3 rc=0
  shift 3
  timeout 60 docker-compose -p "$P" -f "$COMPOSE" -f "$over" --project-directory "$repo" \
    run --rm --no-deps -T bloomstage "$@" >"$T/bad.out" 2>&1 || rc=$?
  ((rc != 0)) || { diag "$T/bad.out"; notok "$desc: exit 0"; }
  grep '^bloomstage: ' "$T/bad.out" >"$T/bad.line"
  [ "$(wc -l <"$T/bad.line")" = 1 ] && grep -qF -- "$want" "$T/bad.line" ||
    { diag "$T/bad.out"; notok "$desc: exit $rc, not one 'bloomstage: ' line naming '$want'"; }
  ok "$desc: exit $rc, '$(cut -c 1-200 "$T/bad.line")'"
}
dc stop bloomstage >/dev/null 2>&1
printf 'services:\n  bloomstage: {}\n' >"$T/none.yml"
bad "a config file that is not mounted" /etc/bloomstage/conf.d/bloomstage.conf "$T/none.yml" \
  run -c /etc/bloomstage/conf.d/bloomstage.conf
mkdir -p "$T/root-owned"
chmod 755 "$T/root-owned"
printf 'services:\n  bloomstage:\n    volumes:\n      - %s:/var/lib/bloomstage\n' "$T/root-owned" >"$T/ro.yml"
bad "a checkpoint volume the image's user cannot write" /var/lib/bloomstage "$T/ro.yml"
printf 'services:\n  bloomstage:\n    environment:\n      BLOOMSTAGE_DEDUP_FPT: "1e-9"\n' >"$T/bad.yml"
bad "a BLOOMSTAGE_* variable naming no key" BLOOMSTAGE_DEDUP_FPT "$T/bad.yml"

# With the restart policy: the service with the bad variable stops after its
# tries, each one's cause in its log.
docker-compose -p "$P" -f "$COMPOSE" -f "$T/bad.yml" --project-directory "$repo" up -d --no-deps \
  --no-build bloomstage >"$T/up-bad.out" 2>&1 || { diag "$T/up-bad.out"; notok "docker-compose up with a bad variable"; }
deadline=$((SECONDS + 60))
while [ "$(state '{{ .State.Status }}')" != exited ] || [ "$(state '{{ .RestartCount }}')" -lt 5 ]; do
  ((SECONDS < deadline)) || notok "the restart policy: $(state '{{ .State.Status }}') after $(state '{{ .RestartCount }}') restarts, 60 s on"
  sleep 0.5
done
sleep 3
[ "$(state '{{ .State.Status }}')" = exited ] || notok "the stage with a bad variable restarts after its tries"
lines=$(docker logs "$(stage_id)" 2>&1 | grep -c '^bloomstage: .*BLOOMSTAGE_DEDUP_FPT')
[ "$lines" = "$(($(state '{{ .RestartCount }}') + 1))" ] ||
  notok "the restart policy: $lines lines naming the cause for $(state '{{ .RestartCount }}') restarts and the first start"
ok "restart policy: exit $(state '{{ .State.ExitCode }}'), $(state '{{ .RestartCount }}') restarts, then stopped; the cause in the log $lines times"

echo "# the container label's wall time: $((SECONDS - t_start)) s"
tap_done
