#!/usr/bin/env bash
# Build the analyzer's libFuzzer targets with clang and run each for N seconds (default 600).
#   bash fuzz/run.sh [seconds] [build-dir]
# Seeds are in fuzz/corpus/{kineto,nsys}; new corpus entries go to the build dir, not the repo.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
out=${2:-build-fuzz}
mkdir -p "$out"
# the analyzer's source list and flags come from CMake (PW_ANALYZER_SOURCES, PINWHEEL_FUZZ)
cmake -S . -B "$out" -DCMAKE_C_COMPILER=clang -DPINWHEEL_FUZZ=ON -DPINWHEEL_TESTS=OFF \
  -DPINWHEEL_SAMPLES=OFF >"$out/cmake.log"
cmake --build "$out" --target fuzz_kineto fuzz_nsys -j"$(nproc)" >>"$out/cmake.log"
for r in kineto nsys; do
  mkdir -p "$out/corpus-$r"
  "$out/fuzz_$r" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "$out/corpus-$r" "fuzz/corpus/$r" >"$out/fuzz_$r.log" 2>&1 &
done
wait
for r in kineto nsys; do
  echo "== $r"; grep -E "^stat::number_of_executed_units|^stat::peak_rss|Done [0-9]+ runs|ERROR|SUMMARY" "$out/fuzz_$r.log" || true
done
