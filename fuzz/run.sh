#!/usr/bin/env bash
# Build the analyzer's libFuzzer targets with clang and run both for N seconds at once (default
# 600); exit status 1 when either finds a crash, a hang or a leak (its log is printed), 0 otherwise.
#   bash fuzz/run.sh [seconds] [build-dir]
# CI runs `bash fuzz/run.sh 60` after the tests (.ci/run).  Installs clang and its libFuzzer
# runtime as root (scripts/need.sh); otherwise says what to install.  Seeds are in
# fuzz/corpus/{kineto,nsys}; new corpus entries and crash inputs go to the build dir, not the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/need.sh
need clang libclang-rt-14-dev cmake make pkg-config libyajl-dev zlib1g-dev libsqlite3-dev
find_cuda
secs=${1:-600}
out=${2:-build-fuzz}
mkdir -p "$out"
# the analyzer's source list and flags come from CMake (PW_ANALYZER_SOURCES, PINWHEEL_FUZZ)
cmake -S . -B "$out" -DCMAKE_C_COMPILER=clang -DPINWHEEL_FUZZ=ON -DPINWHEEL_TESTS=OFF \
  -DPINWHEEL_SAMPLES=OFF >"$out/cmake.log" 2>&1 || { cat "$out/cmake.log"; exit 1; }
cmake --build "$out" --target fuzz_kineto fuzz_nsys -j"$(nproc)" >>"$out/cmake.log" 2>&1 ||
  { tail -n 50 "$out/cmake.log"; exit 1; }
declare -A pid
for r in kineto nsys; do
  mkdir -p "$out/corpus-$r" "$out/crash-$r"
  "$out/fuzz_$r" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/crash-$r/" "$out/corpus-$r" "fuzz/corpus/$r" \
    >"$out/fuzz_$r.log" 2>&1 &
  pid[$r]=$!
done
fail=0
for r in kineto nsys; do
  rc=0
  wait "${pid[$r]}" || rc=$?
  echo "== $r (exit status $rc)"
  grep -E "^stat::number_of_executed_units|^stat::peak_rss|Done [0-9]+ runs" "$out/fuzz_$r.log" || true
  if [ "$rc" != 0 ]; then
    fail=1
    echo "the $r reader's fuzzer failed; its log ends:"
    tail -n 60 "$out/fuzz_$r.log"
    ls "$out/crash-$r"
  fi
done
exit $fail
