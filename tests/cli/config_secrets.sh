#!/bin/sh
# config_secrets.sh -- a secret never reaches the terminal: `bloomstage
# config --check`, `config --list` and the command line's own errors, run
# with a secret set by -X, by the environment, by BLOOMSTAGE_..._FILE and by
# @file:, on success and on every
# error a secret can be part of, and the secret is found 0 times in their
# stdout and stderr together.  Each run must also exit as expected, so a
# run that stops early (and so prints nothing to find) fails too.
#
#   sh tests/cli/config_secrets.sh path/to/bloomstage
#
# Registered by tests/config.cmake.  Runs every command under `env -i`:
# BLOOMSTAGE_* variables of whoever runs it must not leak in.

set -u
bin=${1:?usage: config_secrets.sh path/to/bloomstage}
dir=$(mktemp -d "${TMPDIR:-/tmp}/bs-secrets.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
secret="hunter2-$$-s3cr3t"
printf '%s\n' "$secret" >"$dir/pw"
printf 'SASL_SSL\n' >"$dir/protocol"
out=$dir/out
: >"$out"
failed=0

# run STATUS VAR=VALUE... -- ARG...: bloomstage ARG... with the variables
# only, all output appended to $out; the exit status must be STATUS.
run() {
    want=$1
    shift
    vars=
    while [ "$1" != -- ]; do
        vars="$vars $1"
        shift
    done
    shift
    # shellcheck disable=SC2086  # the variables hold no blanks
    env -i $vars "$bin" "$@" >>"$out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "exit $got, not $want:$vars bloomstage $*"
        failed=1
    fi
}

req="-X input.topics=in -X output.topic=out"
pwvar=BLOOMSTAGE_KAFKA_SASL_PASSWORD
# shellcheck disable=SC2086
{
    # Valid: the secret by each way in, printed redacted.
    run 0 -- config --check $req -X "kafka.sasl.password=$secret"
    run 0 -- config --check $req -X "kafka.sasl.password=@file:$dir/pw"
    run 0 "$pwvar=$secret" -- config --check $req
    run 0 "${pwvar}_FILE=$dir/pw" -- config --check $req
    run 0 "BLOOMSTAGE_KAFKA_SSL_KEY_PASSWORD=@file:$dir/pw" -- \
        config --check $req
    run 0 "${pwvar}_FILE=$dir/pw" -- config --list
    run 0 "$pwvar=$secret" -- config --list
    # Errors a secret is part of: a required key missing, SASL without a
    # mechanism, a misspelt property librdkafka rejects, an unknown key, a
    # missing '=', both X and X_FILE set, a bad value read from a file,
    # -X where it does not belong.
    run 1 -- config --check -X "kafka.sasl.password=$secret"
    run 1 -- config --check $req -X "kafka.sasl.password=$secret" \
        -X kafka.security.protocol=SASL_SSL
    run 1 -- config --check $req -X "kafka.sasl.password=$secret" \
        -X "kafka.security.protocol=@file:$dir/protocol"
    run 1 -- config --check $req -X "kafka.sasl.pasword=$secret"
    run 1 -- config --check $req -X "sasl.password=$secret"
    run 1 -- config --check $req -X "kafka.sasl.password:$secret"
    run 1 "$pwvar=$secret" "${pwvar}_FILE=$dir/pw" -- config --check $req
    run 1 -- config --check $req -X "dedup.fpr=@file:$dir/pw"
    run 1 "BLOOMSTAGE_SASL_PASSWORD=$secret" -- config --check $req
    run 2 -- config --list -X "kafka.sasl.password=$secret"
    # The command line's own errors: a setting without -X, an unknown
    # option carrying a value.
    run 2 -- config --check $req "kafka.sasl.password=$secret"
    run 2 -- run -c /dev/null "kafka.sasl.password=$secret"
    run 2 -- run "--sasl-password=$secret"
    run 2 -- blocklist "--sasl-password=$secret"
}

found=$(grep -c -F -- "$secret" "$out")
if [ "$found" -ne 0 ]; then
    echo "the secret is printed $found times:"
    grep -F -- "$secret" "$out"
    failed=1
fi
# The runs did print the secrets' keys, redacted.
for want in '[redacted]' 'kafka.sasl.password' 'kafka.ssl.key.password'; do
    if ! grep -q -F -- "$want" "$out"; then
        echo "no '$want' in the output"
        failed=1
    fi
done
[ "$failed" -eq 0 ] || { echo "--- all output:"; cat "$out"; }
exit "$failed"
