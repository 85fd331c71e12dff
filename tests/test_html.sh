#!/usr/bin/env bash
# The HTML report in headless Chromium: it renders (a screenshot is taken and is not blank), and
# the page logs no console error, also for a trace whose names try to inject markup and script.
#   test_html.sh PINWHEEL_CLI FIXTURES_DIR      (exit 77 = skipped: no chromium)
set -u
cli=$1
fx=$2
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
  echo "chromium is not installed: skipped"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# a trace with steps inferred (the collector's, no annotations) too
for trace in "$fx/pairs/copybound_naive.json.gz" "$fx/kineto_naive.json.gz" "$fx/hostile.json" \
  "$fx/collector/naive_copy_off.json.gz"; do
  name=$(basename "$trace")
  "$cli" report --format html -o "$tmp/$name.html" "$trace" || { echo "report failed: $trace"; exit 1; }
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 --window-size=1300,1600 \
    --screenshot="$tmp/$name.png" "file://$tmp/$name.html" >"$tmp/$name.log" 2>&1
  size=$(stat -c %s "$tmp/$name.png" 2>/dev/null || echo 0)
  if [ "$size" -lt 8000 ]; then
    echo "FAIL $name: screenshot missing or blank ($size bytes)"
    fail=1
  fi
  if grep -E "CONSOLE|Uncaught|xss-" "$tmp/$name.log"; then
    echo "FAIL $name: the page logged to the console"
    fail=1
  fi
  # everything the text report says is in the page, and the axis' last label ends at the axis
  if [ "$name" = copybound_naive.json.gz ]; then
    for h in "Devices" "Where idle time went" "Other operations" "Host syncs" "Steps" \
      "Top kernels" "Exposed copies" "What-if under pinwheel" "assumptions:" "Findings" \
      "Timeline" "Each step" 'text-anchor="end"' "<title>H2D exposed, "; do
      grep -qF "$h" "$tmp/$name.html" || { echo "FAIL $name: the page lacks '$h'"; fail=1; }
    done
  fi
  echo "$name: screenshot $size bytes, console clean"
done
exit $fail
