#!/usr/bin/env bash
# One call on a GPU machine: build, then the GPU tests ONLY names (all of them when ONLY is unset;
# none with ONLY=none), then the benchmark classes BENCH names, each within its time box; every
# log under OUT (the per-test logs packed into one file).
#   OUT=out ONLY='^torture_|^torch_' BENCH='copybound copy' REPS=3 bash tests/gpu/device_run.sh
#   SUITE_S  seconds for the tests (default 300; all 72 took 543 s on the single-GPU H200 machine,
#            so a 10-minute call holds them with the build and little else); BENCH_S seconds for
#            each benchmark class (300; 560 for loader, the DataLoader training class of about 8
#            minutes: run it alone, ONLY=none BENCH=loader, to fit a 10-minute call)
#   BENCH_ARGS  more arguments of bench.py (e.g. --collector-quick); each class is given
#            --deadline (its box less 20 s): it stops after the last whole round that fits,
#            so its table is printed with the rounds made instead of being cut
#   KINDS=0x400,0x1ff  also bench/collector_kinds.py with these masks, on a build-diag shim
#            (-DPINWHEEL_TRACE_DIAG=ON); KINDS_S seconds for it (300); KINDS_ARGS more of its
#            arguments (e.g. --workloads copybound,resnet,d2h --modes stage,off); its table in
#            OUT/kinds.md
#   CUPTI_COST=1 also bench/cupti_cost.py (CUPTI's cost per CUDA call, kind by kind), its table
#            in OUT/cupti_cost.md (CUPTI_COST_S seconds, 180 by default)
#   DMA_PROBE=1 also bench/dma_probe.cu (where a staged copy's DMA loses speed, without pinwheel),
#            built with nvcc, 5 rounds; its output in OUT/dma_probe.log
#   RECORD=1 also the recordings of tests/gpu/record.sh, into OUT/rec.tgz (after the tests;
#            RECORD_S seconds, 240 by default: cut short, what was recorded is packed anyway)
# The analyzer and the CPU tests are not built (the GPU machine need not have their libraries).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT/gpu"
t0=$SECONDS
if ! { cmake -S . -B build-dev -DPINWHEEL_TESTS=OFF -DPINWHEEL_ANALYZER=OFF \
  -DCMAKE_BUILD_TYPE=Release && cmake --build build-dev -j"$(nproc)"; } >"$OUT/build.log" 2>&1; then
  tail -n 30 "$OUT/build.log"
  exit 1
fi
echo "built in $((SECONDS - t0)) s"
{
  nvidia-smi -L
  uname -r
  nproc
} >"$OUT/machine.txt" 2>&1 # not the commit: a copied tree's .git may be older than its files
if [ "${ONLY:-}" != none ]; then
  t1=$SECONDS
  B=build-dev OUT="$OUT/gpu" ONLY="${ONLY:-}" timeout "${SUITE_S:-300}" bash tests/gpu/run.sh 2>&1 |
    tee "$OUT/suite.log"
  echo "tests took $((SECONDS - t1)) s"
fi
if [ "${DMA_PROBE:-0}" = 1 ]; then
  if nvcc -O2 -o build-dev/dma_probe bench/dma_probe.cu -lpthread >"$OUT/dma_probe.log" 2>&1; then
    timeout 120 build-dev/dma_probe 5 2>&1 | tee -a "$OUT/dma_probe.log"
  else
    tail -n 20 "$OUT/dma_probe.log"
  fi
fi
if [ "${RECORD:-0}" = 1 ]; then
  t1=$SECONDS
  B=build-dev REC="$OUT/rec" timeout "${RECORD_S:-240}" bash tests/gpu/record.sh 2>&1 | tee "$OUT/record.log"
  if [ -d "$OUT/rec" ]; then # cut short before record.sh packed it
    tar czf "$OUT/rec.tgz" -C "$OUT" rec && rm -rf "$OUT/rec"
  fi
  echo "recordings took $((SECONDS - t1)) s"
fi
if [ -n "${KINDS:-}" ]; then
  t1=$SECONDS
  if cmake -S . -B build-diag -DPINWHEEL_TESTS=OFF -DPINWHEEL_ANALYZER=OFF -DPINWHEEL_SAMPLES=OFF \
    -DPINWHEEL_TRACE_DIAG=ON -DCMAKE_BUILD_TYPE=Release >"$OUT/build-diag.log" 2>&1 &&
    cmake --build build-diag -j"$(nproc)" >>"$OUT/build-diag.log" 2>&1; then
    PYTHONUNBUFFERED=1 timeout "${KINDS_S:-300}" python3 bench/collector_kinds.py --build build-diag \
      --masks "$KINDS" ${KINDS_ARGS:-} --md "$OUT/kinds.md" 2>&1 | tee "$OUT/kinds.log"
  else
    tail -n 30 "$OUT/build-diag.log"
  fi
  echo "kinds took $((SECONDS - t1)) s"
fi
if [ "${CUPTI_COST:-0}" = 1 ]; then
  t1=$SECONDS
  PYTHONUNBUFFERED=1 timeout "${CUPTI_COST_S:-180}" python3 bench/cupti_cost.py --md "$OUT/cupti_cost.md" 2>&1 |
    tee "$OUT/cupti_cost.log"
  echo "cupti_cost took $((SECONDS - t1)) s"
fi
for b in ${BENCH:-}; do
  t1=$SECONDS
  box=${BENCH_S:-300}
  [ "$b" = loader ] && box=${BENCH_S:-560}
  PYTHONUNBUFFERED=1 timeout "$box" python3 bench/bench.py --build build-dev \
    --reps "${REPS:-3}" --deadline "$((box > 60 ? box - 20 : box))" --only "$b" ${BENCH_ARGS:-} --log "$OUT/gpu/bench_$b.log" --md "$OUT/bench_$b.md" \
    >"$OUT/gpu/bench_$b.out" 2>&1
  echo "bench $b: status $? in $((SECONDS - t1)) s"
  cat "$OUT/bench_$b.md" 2>/dev/null || tail -n 20 "$OUT/gpu/bench_$b.out"
done
tar czf "$OUT/logs.tgz" -C "$OUT" gpu
rm -rf "$OUT/gpu"
