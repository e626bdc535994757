# tests/lib/compose.sh -- what the tests of the compose stack share: reading
# docker-compose.yml's services, and the model of what the demo producer's
# stream must become.  Sourced by tests/kafka/test_compose_kafka.sh (the
# stack's configuration run without Docker) and
# tests/container/test_container.sh (the stack itself, in Docker).
#
#   $COMPOSE                 the compose file read (set before calling)
#   service_block S          service S's lines (indented under `  S:`)
#   service_command S        the literal block (`- |`) of S's command
#   service_env S            S's `environment:` as KEY=VALUE lines
#   service_volumes S        S's volumes as HOST|CONTAINER lines
#   compose_model SPAM IN    the model of input IN (the producer's KEY|VALUE
#                            lines) under blocklist SPAM (the mounted
#                            spam-senders.txt): one line per record, `out ID
#                            -` or `rej ID REASON`, in $T/model.txt, the
#                            sorted expectations in $T/want-out.txt and
#                            $T/want-rej.txt, the counts in want_out,
#                            want_rej, want_dup, want_spam; non-zero when
#                            the stream is too small to test anything
#   metrics_match TEXT N     /metrics' TEXT counts N records in and the
#                            model's out, duplicate and spam counts; else
#                            its bloomstage_records lines as TAP comments,
#                            non-zero
#   rejected_with_reason     a console consumer's HEADERS TAB KEY TAB VALUE
#                            lines (print.headers, print.key) on stdin, as
#                            sorted `ID REASON` lines (bloomstage-reason)

# The lines of service $1's block (indented 4 and more under `  $1:`).
service_block() {
  awk -v s="  $1:" '
    $0 == s { on = 1; next }
    on && /^  [^ #]/ { exit }
    on && /^[^ ]/ { exit }
    on { print }' "$COMPOSE"
}
# The literal block (`- |`) of service $1's `command:`, dedented.
service_command() {
  service_block "$1" | awk '
    /^    command:/ { c = 1; next }
    c && /^      - \|$/ { b = 1; next }
    b && (/^        / || /^$/) { sub(/^        /, ""); print; next }
    b { exit }
    c && /^    [^ ]/ { exit }'
}
# The `environment:` block of service $1 as KEY=VALUE lines.  Only the map
# form (KEY: VALUE, VALUE plain or double-quoted) is understood; anything
# else fails, so the parser never silently reads something else.
service_env() {
  service_block "$1" | awk '
    /^    environment:[[:space:]]*$/ { on = 1; next }
    on && /^    [^ ]/ { exit }
    on && /^[[:space:]]*(#.*)?$/ { next }
    on {
      if (!match($0, /^      [A-Z_][A-Z0-9_]*: /)) { print "BAD " $0; exit 1 }
      k = substr($0, 7, RLENGTH - 8); v = substr($0, RLENGTH + 1)
      sub(/[[:space:]]+#.*$/, "", v)
      if (v ~ /^".*"$/) v = substr(v, 2, length(v) - 2)
      else if (v ~ /["'\''{}\[\]&*!|>%@`]/) { print "BAD " $0; exit 1 }
      print k "=" v
    }'
}
# service $1's volumes as HOST|CONTAINER lines (bind mounts ./X: HOST is
# the repo's X; named volumes: $T/volumes/NAME).
service_volumes() {
  service_block "$1" | awk '
    /^    volumes:/ { on = 1; next }
    on && /^    [^ ]/ { exit }
    on && /^      - / { v = substr($0, 9); n = split(v, a, ":"); print a[1] "|" a[2] }'
}

# The model: blocklist by the sender (json:/from), then dedup by event id
# (json:/id), as the bloomstage service's environment configures the stage.
compose_model() {
  grep -v '^#' "$1" | grep . >"$T/spam.txt"
  awk 'NR == FNR { spam[$0] = 1; next }
       { id = $0; sub(/\|.*/, "", id)
         from = $0; sub(/.*"from":"/, "", from); sub(/".*/, "", from)
         if (from in spam) print "rej", id, "blocklist:spam"
         else if (id in seen) print "rej", id, "duplicate"
         else { print "out", id, "-"; seen[id] = 1 } }' "$T/spam.txt" "$2" >"$T/model.txt"
  awk '$1 == "out" { print $2 }' "$T/model.txt" | sort >"$T/want-out.txt"
  awk '$1 == "rej" { print $2, $3 }' "$T/model.txt" | sort >"$T/want-rej.txt"
  want_out=$(grep -c '^out' "$T/model.txt")
  want_rej=$(grep -c '^rej' "$T/model.txt")
  want_dup=$(grep -c ' duplicate$' "$T/model.txt")
  want_spam=$(grep -c ' blocklist:spam$' "$T/model.txt")
  [ "$want_out" -gt 10000 ] && [ "$want_dup" -gt 1000 ] && [ "$want_spam" -gt 100 ]
}

rejected_with_reason() {
  awk -F'\t' '{ r = $1; sub(/.*bloomstage-reason:/, "", r); sub(/,.*/, "", r); print $2, r }' | sort
}

metrics_match() {
  local text=$1 n=$2
  m() { awk -v s="$1" '$1 == s { print $2 }' <<<"$text"; }
  [ "$(m bloomstage_records_in_total)" = "$n" ] &&
    [ "$(m bloomstage_records_out_total)" = "$want_out" ] &&
    [ "$(m 'bloomstage_records_dropped_total{reason="duplicate"}')" = "$want_dup" ] &&
    [ "$(m 'bloomstage_records_dropped_total{reason="blocklist",list="spam"}')" = "$want_spam" ] ||
    { grep '^bloomstage_records' <<<"$text" | sed 's/^/# /'; return 1; }
}
