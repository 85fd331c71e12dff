#!/usr/bin/env bash
# Every usage error of `pinwheel` says what is wrong: standard output empty, standard error two
# lines, the first naming the problem as below, the second the hint "see 'pinwheel CMD --help'",
# and exit status 2.  And every option the command's sources compare an argument with
# (strcmp(a, "--x")) is in some --help text.
#   test_cli_errors.sh PINWHEEL CMD_SOURCE_DIR
set -u
cli=$1
src=$2
fail=0 n=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# check HINT_CMD EXPECTED_FIRST_LINE ARGS...  (HINT_CMD: the command the hint names, - for none)
check() {
  local sub=$1 want=$2
  shift 2
  n=$((n + 1))
  "$cli" "$@" >"$work/out" 2>"$work/err"
  local rc=$? hint="see 'pinwheel${sub:+ $sub} --help'"
  local got
  got=$(cat "$work/err")
  if [ "$rc" != 2 ] || [ -s "$work/out" ] || [ "$got" != "$want"$'\n'"$hint" ]; then
    echo "pinwheel $*: exit $rc, stdout $(wc -c <"$work/out") bytes, stderr:"
    sed 's/^/    /' "$work/err"
    echo "  expected exit 2, nothing on stdout, and:"
    printf '    %s\n    %s\n' "$want" "$hint"
    fail=1
  fi
}

check "" "pinwheel: no command given"
check "" "pinwheel: unknown command 'bogus'" bogus
check "" "pinwheel: unknown option --bogus" --bogus
check "" "pinwheel: --version takes no arguments, not 'x'" --version x
check "" "pinwheel: --help takes no arguments, not 'x'" --help x
check options "pinwheel options: unexpected argument 'x'" options x
check options "pinwheel options: unknown option -x" options -x
check run "pinwheel run: no command given (pinwheel run [OPTIONS] [--] CMD ARGS...)" run
check run "pinwheel run: no command given (pinwheel run [OPTIONS] [--] CMD ARGS...)" run --stats --
check run "pinwheel run: unknown option --bogus" run --bogus true
check run "pinwheel run: a value is missing after the option --mode (--mode off|observe|stage)" run --mode
check run "pinwheel run: --mode takes off, observe or stage, not 'fast'" run --mode fast true
check run "pinwheel run: --sync takes keep or elide, not 'x'" run --sync x true
check run "pinwheel run: --trace-delay abc: not a valid value (PINWHEEL_TRACE_DELAY in 'pinwheel options')" \
  run --trace delay.json --trace-delay abc true
check run "pinwheel run: --trace-duration (PINWHEEL_TRACE_DURATION) needs a trace: --trace PATH" \
  run --trace-duration 2 true

if "$cli" --help | grep -q '^  report '; then
  check report "pinwheel report: no trace given" report
  check report "pinwheel report: no trace given" report --format json
  check report "pinwheel report: unknown option --bogus" report --bogus t.json
  check report "pinwheel report: a value is missing after the option -o (-o FILE)" report t.json -o
  check report "pinwheel report: a value is missing after the option --threshold (--threshold NAME=VALUE)" \
    report t.json --threshold
  check report "pinwheel report: --format takes text, json, html or svg, not 'pdf'" report --format pdf t.json
  check report "pinwheel report: --steps takes all or summary, not 'some'" report --steps some t.json
  check report "pinwheel report: --step needs a step number (0 or more), not 'x'" report --step x t.json
  check report "pinwheel report: --step needs a step number (0 or more), not '-1'" report --step -1 t.json
  check report "pinwheel report: --step-range '(' is not a regular expression: Unmatched ( or \\(" \
    report --step-range '(' t.json
  check report "pinwheel report: --format svg draws one trace, not 2" report --format svg a.json b.json
  check report "pinwheel report: standard input (-) can be given once" report - -
  check report "pinwheel report: --threshold buckets=100: must be an integer from 1 to 64" \
    report --threshold buckets=100 t.json
  check report "pinwheel report: --threshold buckets=2.5: must be an integer from 1 to 64" \
    report --threshold buckets=2.5 t.json
  check report "pinwheel report: --threshold gap_ms=1e400: must be a number from 0 to 60000" \
    report --threshold gap_ms=1e400 t.json
  check report "pinwheel report: --threshold gap_ms=nan: 'nan' is not a number" \
    report --threshold gap_ms=nan t.json
  check report "pinwheel report: --threshold gap_ms=inf: must be a number from 0 to 60000" \
    report --threshold gap_ms=inf t.json
  check report "pinwheel report: --threshold h2d_gbps=0: must be a number above 0 and at most 100000" \
    report --threshold h2d_gbps=0 t.json
  check report "pinwheel report: --threshold exposed_max_hidden_pct=150: must be a number from 0 to 100" \
    report --threshold exposed_max_hidden_pct=150 t.json
  check report "pinwheel report: --threshold gap_ms: not NAME=VALUE" report --threshold gap_ms t.json
  names=$("$cli" report --help | grep -oE '^  [a-z0-9_]+ +[0-9.e+-]+ ' | awk '{print $1}' | paste -sd, - | sed 's/,/, /g')
  check report "pinwheel report: unknown threshold 'x'; the thresholds are: $names" \
    report --threshold x=1 t.json
  check diff "pinwheel diff: no traces given (two are compared: BEFORE AFTER)" diff
  check diff "pinwheel diff: one trace given, 'ONE'; two are compared: BEFORE AFTER" diff ONE
  check diff "pinwheel diff: two traces, not more ('c')" diff a b c
  check diff "pinwheel diff: unknown option --step" diff --step 3 a b
  check diff "pinwheel diff: a value is missing after the option --format (--format text|json)" diff a b --format
  check diff "pinwheel diff: --format takes text or json, not 'html'" diff --format html a b
  check diff "pinwheel diff: standard input (-) can be given once" diff - -
  check export "pinwheel export: no trace given" export -o out.json
  check export "pinwheel export: no output file given (-o OUT)" export --format chrome TRACE
  check export "pinwheel export: a value is missing after the option -o (-o OUT)" export --format chrome TRACE -o
  check export "pinwheel export: --format takes only chrome, not 'text'" export --format text -o o.json T
  check export "pinwheel export: one trace, not more ('b')" export -o o.json a b
  check export "pinwheel export: unknown option --whole-trace" export --whole-trace -o o.json a
else
  for c in report diff export; do
    check "" "pinwheel: $c: this pinwheel was built without the analyzer (PINWHEEL_ANALYZER=OFF)" "$c" t.json
  done
fi

# every option literal the parsers compare an argument with is in a --help text
helps=$("$cli" --help; for c in run options report diff export; do "$cli" "$c" --help 2>/dev/null; done)
# (without the analyzer, report, diff and export are not built: an_cli.c is left out)
sources=$(ls "$src"/*.c)
"$cli" --help | grep -q '^  report ' || sources=$(grep -v '/an_cli\.c$' <<<"$sources")
for opt in $(grep -ohE 'strcmp\([a-z>.-]+, "-[-a-z]*"\)' $sources | grep -oE '"-[-a-z]*"' | tr -d '"' | sort -u); do
  [ "$opt" = "-" ] || [ "$opt" = "--" ] || [ "$opt" = "-h" ] && continue
  grep -qE -- "(^|[ [(])$opt([] ,=)]|$)" <<<"$helps" || { echo "the sources accept $opt, which no --help shows"; fail=1; }
done
[ $fail = 0 ] && echo "$n usage errors said in one line with the hint and exit status 2; --help shows every option compared"
exit $fail
