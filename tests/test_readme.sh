#!/usr/bin/env bash
# The README, `pinwheel options` and `pinwheel --help` say the same thing: every option with its
# default is in the README's table (and nothing else is), every command of --help is in the README.
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
for cmd in run options report diff export; do
  "$cli" --help | grep -qE "^  $cmd( |$)" || { echo "pinwheel --help lacks $cmd"; fail=1; }
  grep -q "pinwheel $cmd" "$readme" || { echo "README never shows pinwheel $cmd"; fail=1; }
done
[ $fail = 0 ] && echo "README, --help and the options table agree"
exit $fail
