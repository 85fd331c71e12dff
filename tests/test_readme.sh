#!/usr/bin/env bash
# The README, `pinwheel options` and `pinwheel --help` say the same thing: every option with its
# default is in the README's table (and nothing else is), every threshold of `pinwheel report
# --help` with its default and range is in the README's thresholds table (and nothing else is),
# every command of --help is in the README.
set -u
cli=$1
readme=$2
fail=0
opts=$("$cli" options | tail -n +2)
while read -r name def _; do
  grep -qF "| \`$name\` | \`$def\` |" "$readme" || { echo "README lacks the row for $name (default $def)"; fail=1; }
done <<<"$opts"
for row in $(grep -oE '^\| `PINWHEEL_[A-Z_]+`' "$readme" | tr -d '|` '); do
  grep -q "^$row " <<<"$opts" || { echo "README lists $row, which pinwheel options does not"; fail=1; }
done
# the thresholds: every one `pinwheel report --help` prints is a row of the README's table with its
# default, range and meaning, and the table has no other
re='^  ([a-z0-9_]+) +([0-9.e+-]+) ([^ ]*) +((integer )?>?[^ ]+ to [^ ]+) +(.*)$'
thresholds=
while IFS= read -r line; do
  [[ $line =~ $re ]] || continue
  name=${BASH_REMATCH[1]} def=${BASH_REMATCH[2]}${BASH_REMATCH[3]:+ ${BASH_REMATCH[3]}}
  range=${BASH_REMATCH[4]} meaning=${BASH_REMATCH[6]}
  thresholds+="$name "
  grep -qF "| \`$name\` | \`$def\` | $range | $meaning |" "$readme" ||
    { echo "README lacks the row for the threshold $name ($def, $range, $meaning)"; fail=1; }
done < <("$cli" report --help)
[ -n "$thresholds" ] || { echo "pinwheel report --help lists no thresholds"; fail=1; }
for row in $(grep -oE '^\| `[a-z0-9_]+` \| `[0-9]' "$readme" | grep -oE '`[a-z0-9_]+`' | tr -d '`'); do
  [[ " $thresholds" == *" $row "* ]] || { echo "README lists the threshold $row, which pinwheel report --help does not"; fail=1; }
done
for cmd in run options report diff export; do
  "$cli" --help | grep -qE "^  $cmd( |$)" || { echo "pinwheel --help lacks $cmd"; fail=1; }
  grep -q "pinwheel $cmd" "$readme" || { echo "README never shows pinwheel $cmd"; fail=1; }
done
[ $fail = 0 ] && echo "README, --help, the options table and the thresholds agree"
exit $fail
