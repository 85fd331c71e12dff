#!/usr/bin/env bash
# pinwheel's demo: build, then show what it does.
#   with a GPU:    samples/naive_copy as is and under pinwheel (the exit summary), both traced and
#                  compared step by step (pinwheel diff), then a report
#   without a GPU: the report of a real torch.profiler trace bundled in tests/fixtures
set -euo pipefail
cd "$(dirname "$0")"
. scripts/need.sh
need cmake make gcc g++ pkg-config libyajl-dev zlib1g-dev libsqlite3-dev
find_cuda
cmake -S . -B build-demo -DPINWHEEL_TESTS=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-demo -j"$(nproc)" >/dev/null
B=build-demo
if nvidia-smi -L >/dev/null 2>&1 && [ -x $B/naive_copy ]; then
  echo "== a GPU is here: samples/naive_copy (64 MiB pageable cudaMemcpy + 6 ms kernel), as is:"
  $B/naive_copy 64 30 6
  echo "== the same binary under pinwheel (no code change):"
  $B/pinwheel run --stats -- $B/naive_copy 64 30 6
  echo
  # the same two runs traced (CUPTI, no code change), then the traces side by side per step
  # (naive_copy marks each iteration with an NVTX range train_step#N)
  rm -f $B/demo-base.json.gz $B/demo-staged.json.gz
  echo "== both again, traced: pinwheel run [--mode off] --trace $B/demo-{base,staged}.json.gz -- naive_copy 64 30 6"
  $B/pinwheel run --mode off --trace $B/demo-base.json.gz -- $B/naive_copy 64 30 6 || true
  $B/pinwheel run --trace $B/demo-staged.json.gz -- $B/naive_copy 64 30 6 || true
  if [ -s $B/demo-base.json.gz ] && [ -s $B/demo-staged.json.gz ]; then
    echo "== pinwheel diff --step-range '^train_step' $B/demo-base.json.gz $B/demo-staged.json.gz"
    $B/pinwheel diff --step-range '^train_step' $B/demo-base.json.gz $B/demo-staged.json.gz || true
    echo "== pinwheel report $B/demo-staged.json.gz (its first lines; all of it: $B/demo-report.txt)"
    $B/pinwheel report $B/demo-staged.json.gz >$B/demo-report.txt && head -4 $B/demo-report.txt
    echo "   (both traces open in Perfetto, ui.perfetto.dev)"
  else
    echo "(no trace was written: CUPTI could not be used here, as the warning above says)"
  fi
  echo
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "== no GPU here: the report of a real torch.profiler trace (a copy-bound training loop on an H200)."
  echo "   On a GPU machine this demo first runs samples/naive_copy as is and under pinwheel, traced, and compares them step by step."
fi
P=tests/fixtures/pairs
echo "== pinwheel report $P/copybound_naive.json.gz"
$B/pinwheel report $P/copybound_naive.json.gz
echo
echo "== pinwheel diff: the same loop without and with pinwheel (the what-if above predicted it)"
$B/pinwheel diff $P/copybound_naive.json.gz $P/copybound_pinwheel.json.gz
