#!/bin/sh
# test_help.sh -- every command of bloomstage answers --help with its usage
# on stdout and exit 0, and a usage error with exit 2.  The commands are
# read from `bloomstage --help`, so a new command is checked without
# touching this file; the subcommands of each are listed here.
#
#   sh tests/cli/test_help.sh path/to/bloomstage
. "$(dirname "$0")/../lib/tap.sh"
bin=${1:?usage: test_help.sh path/to/bloomstage}

check "bloomstage --help exits 0" sh -c '"$@" >/dev/null' _ "$bin" --help
commands=$("$bin" --help | sed -n '/^Commands:/,/^$/p' | awk 'NF && !/^Commands:/ { print $1 }')
check "bloomstage --help lists commands" test -n "$commands"
for c in $commands; do
  case $c in
    filter) subs="build info query merge" ;;
    blocklist) subs="add remove load" ;;
    checkpoint) subs="info" ;;
    *) subs="" ;;
  esac
  for s in "" $subs; do
    out=$("$bin" $c $s --help 2>/dev/null)
    check "bloomstage $c $s --help exits 0" sh -c '"$@" >/dev/null' _ "$bin" $c $s --help
    check "bloomstage $c $s --help prints its usage" \
      sh -c 'printf "%s\n" "$1" | grep -q "^usage: bloomstage $2"' _ "$out" "$c"
    rc=0
    "$bin" $c $s --no-such-option >/dev/null 2>&1 || rc=$?
    check "bloomstage $c $s --no-such-option exits 2 (got $rc)" test "$rc" -eq 2
  done
done
rc=0
"$bin" no-such-command >/dev/null 2>&1 || rc=$?
check "an unknown command exits 2 (got $rc)" test "$rc" -eq 2
tap_done
