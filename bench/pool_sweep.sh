#!/usr/bin/env bash
# pool_sweep.sh — the pinned pool's size (PINWHEEL_HOST_POOL) on the classes it can move, each
# size a variant of bench/sweep.py, processes interleaved on one machine (needs a GPU).
#
#   B=build-dev OUT=out POOLS="64M 96M 128M" CLASSES="copybound d2h" REPS=4 bash bench/pool_sweep.sh
#
# B and OUT are relative to the repository's root.
# CLASSES (all by default, about 10 minutes at REPS=3 with three sizes; split them over runs):
#   copybound  samples/train_copybound.py, the hand-written prefetcher as the baseline
#   d2h        samples/infer_d2h.py (.cpu() of the outputs)
#   resnet50   samples/train_naive.py
#   jax        samples/jax_copybound.py --iters 40
#   loader     samples/train_loader.py, ResNet-18, 10 workers, --channels-last, 20 steps
# TRACE=1: after the copybound class, one more process a size traced by pinwheel's collector
# (OUT/pool_trace_<size>.json.gz, 12 steps after 5) and read by bench/chunk_rates.py: the DMA
# rate while the staging threads copy and after, the DMA left when each staged call returned
# and the engine's idle time between two copies, appended to OUT/pool_sweep.md.
# Writes OUT/pool_sweep.md (one table a class: each size's median and its rounds) and each
# class's processes' output to OUT/pool_<class>.log.  A process that fails shows as a missing
# round (its output in the log), a size with none as "failed"; copybound and d2h compare the
# bytes they copied and fail when they differ, the others do not compare bytes.
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 2
B=${B:-build-dev}
OUT=${OUT:-out}
POOLS=${POOLS:-64M 96M 128M}
CLASSES=${CLASSES:-copybound d2h resnet50 jax loader}
REPS=${REPS:-3}
LIB=$B/libpinwheel.so
[ -f "$LIB" ] || { echo "pool_sweep: no $LIB (build the shim first)" >&2; exit 2; }
mkdir -p "$OUT"
md=$OUT/pool_sweep.md
for c in $CLASSES; do
  extra=(--reps "$REPS") # never empty: "${extra[@]}" under set -u needs bash >= 4.4 when it is
  case $c in
  copybound) cmd="sh -c 'python3 samples/train_copybound.py --mode \$M'" pat='([\d.]+) ms/step'
    extra+=(--variant "prefetcher:M=prefetch") ;;
  d2h) cmd="python3 samples/infer_d2h.py" pat='([\d.]+) ms/step' ;;
  resnet50) cmd="python3 samples/train_naive.py" pat='([\d.]+) ms/iter' ;;
  jax) cmd="python3 samples/jax_copybound.py --iters 40" pat='([\d.]+) ms/iter' ;;
  loader) cmd="python3 samples/train_loader.py --model resnet18 --workers 10 --channels-last --iters 20"
    pat='([\d.]+) ms/iter' ;;
  *) echo "pool_sweep: unknown class $c" >&2; exit 2 ;;
  esac
  variants=()
  for p in $POOLS; do
    variants+=(--variant "$p:M=naive LD_PRELOAD=$LIB PINWHEEL_HOST_POOL=$p")
  done
  printf '\n%s (ms, median of %s):\n\n' "$c" "$REPS" | tee -a "$md"
  python3 bench/sweep.py --pattern "$pat" --cmd "$cmd" "${variants[@]}" "${extra[@]}" \
    --log "$OUT/pool_$c.log" | grep '^|' | tee -a "$md" || {
    echo "pool_sweep: $c: bench/sweep.py failed" >&2
    exit 1
  }
  if [ "$c" = copybound ] && [ "${TRACE:-0}" = 1 ]; then
    printf '\ncopybound traced (bench/chunk_rates.py):\n\n' | tee -a "$md"
    for p in $POOLS; do
      t=$OUT/pool_trace_$p.json.gz
      rm -f "$t"
      PINWHEEL_HOST_POOL=$p PINWHEEL_TRACE=$t LD_PRELOAD=$LIB python3 samples/train_copybound.py \
        --iters 12 --warmup 5 >>"$OUT/pool_$c.log" 2>&1 || echo "pool_sweep: $p: traced run failed" >&2
      { echo "$p:"; python3 bench/chunk_rates.py "$t" 2>&1; } | tee -a "$md"
    done
  fi
done
