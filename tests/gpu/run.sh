#!/usr/bin/env bash
# GPU tests of pinwheel (DESIGN.md §6).  Run on a machine with a CUDA GPU, from the repo root:
#   B=build OUT=out bash tests/gpu/run.sh
# B: a build tree with samples (cmake -DPINWHEEL_SAMPLES=ON); OUT: where logs and summaries go.
# Prints PASS/FAIL per test and "N passed, N failed" last; exit status 1 on any failure.
# ONLY=REGEX runs only the tests whose names match it (bash regex), e.g. ONLY='^trace_'.
set -u
B=${B:-build}
OUT=${OUT:-out}
mkdir -p "$OUT"
LIB=$(cd "$B" && pwd)/libpinwheel.so
export LIB # the helpers below also run inside `bash -c`
export PYTHONPATH=$PWD/samples${PYTHONPATH:+:$PYTHONPATH}
export CUBLAS_WORKSPACE_CONFIG=:4096:8
passed=0
failed=0

t() { # t NAME CMD... : run CMD, log to $OUT/NAME.log
  local name=$1
  shift
  [[ -z ${ONLY:-} || $name =~ $ONLY ]] || return 0
  local t0=$SECONDS
  if "$@" >"$OUT/$name.log" 2>&1; then
    passed=$((passed + 1))
    echo "PASS $name ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    echo "FAIL $name ($((SECONDS - t0)) s)"
    tail -n 15 "$OUT/$name.log" | sed 's/^/    /'
  fi
}

observe() { env PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD="$LIB" "$@"; }
stage() { env PINWHEEL_MODE=stage PINWHEEL_STATS=1 LD_PRELOAD="$LIB" "$@"; }
# staged CMD...: stage, and fail unless the summary shows copies that were really staged, or
# (frameworks that stage themselves: XLA) the program's own staging memcpy on pinwheel's threads
# (a test whose preload silently went missing once passed without the shim)
staged() {
  local log rc
  log=$(mktemp)
  stage "$@" >"$log" 2>&1
  rc=$?
  cat "$log"
  [ $rc -eq 0 ] && grep -qE '^ +(ring|pinned_only|d2h) +[1-9]|memcpy into its pinned memory [1-9]' "$log" &&
    return 0
  echo "FAILED: status $rc, or nothing was staged"
  return 1
}
# deferred CMD...: staged, and the summary shows copies that returned before their copy-in
deferred() {
  local log
  log=$(mktemp)
  staged "$@" >"$log" 2>&1 || { cat "$log"; return 1; }
  cat "$log"
  grep -qE '^ +deferred copies [1-9]' "$log" && return 0
  echo "FAILED: no copy was deferred"
  return 1
}
helpers="$(declare -f stage staged deferred)"

# (a) observe mode: the C sample and PyTorch, summaries checked against what the programs did
t observe_naive_copy bash -c "
  env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/observe_naive_copy.json \
    PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB $B/naive_copy 64 20 2 &&
  python3 tests/gpu/check_observe.py naive_copy $OUT/observe_naive_copy.json 23 64 &&
  env PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB $B/naive_copy 64 20 2"
t observe_torch bash -c "
  env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/observe_torch_10.json \
    PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB python3 tests/gpu/torch_copies.py 10 4 &&
  env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/observe_torch_20.json \
    PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB python3 tests/gpu/torch_copies.py 20 4 &&
  python3 tests/gpu/check_observe.py torch $OUT/observe_torch_10.json $OUT/observe_torch_20.json 10 4 &&
  env PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB python3 tests/gpu/torch_copies.py 10 4"

# (b) staged copies, bytes compared: 10^4 random copies, 8 threads, both default-stream flavours
t torture_stage staged "$B/copy_torture" 8 1250 512 1
t torture_ptds staged "$B/copy_torture_ptds" 8 300 256 2
t torture_no_ring env PINWHEEL_DEVICE_RING=0 bash -c "$helpers; staged $B/copy_torture 4 300 128 3"
t torture_small_pool env PINWHEEL_HOST_POOL=16M PINWHEEL_CHUNK=1M PINWHEEL_DEVICE_RING=64M \
  bash -c "$helpers; staged $B/copy_torture 4 300 128 4"
# sync elision is the default (the runs above elide); PINWHEEL_SYNC=keep never elides
t torture_sync_keep env PINWHEEL_SYNC=keep bash -c "$helpers; staged $B/copy_torture 8 300 64 5"
# deferred staging (the default): copies of 1 MiB up to half the pool return before their copy-in,
# the source overwritten and freed at once by the program; with a 512 MiB pool up to 256 MiB
t torture_deferred deferred "$B/copy_torture" 8 300 24 7
t torture_deferred_bigpool env PINWHEEL_HOST_POOL=512M bash -c "$helpers; deferred $B/copy_torture 4 150 256 8"
t torture_deferred_ptds deferred "$B/copy_torture_ptds" 8 200 24 9
t torture_not_deferred env PINWHEEL_DEFER=0 bash -c "$helpers; staged $B/copy_torture 8 300 24 7 |
  tee /dev/stderr | grep -q 'staged, not deferred: off'"

# (b2) the staging data paths of issue 7, bytes compared by the programs themselves: one 256 MiB
# copy each way (also into fresh memory), with the defaults, a big pool of big chunks and an odd
# thread count; the copy-bound training loop; the D2H-heavy loop (whose outputs must stay unpinned)
t bw_bytes_defaults staged "$B/copy_bw" 256
t bw_bytes_bigpool env PINWHEEL_HOST_POOL=256M PINWHEEL_CHUNK=8M \
  bash -c "$helpers; staged $B/copy_bw 256"
t bw_bytes_threads3 env PINWHEEL_THREADS=3 bash -c "$helpers; staged $B/copy_bw 100"
t torture_bigpool env PINWHEEL_HOST_POOL=256M PINWHEEL_CHUNK=8M \
  bash -c "$helpers; staged $B/copy_torture 8 300 256 6"
t timeline_copy staged python3 tests/gpu/timeline_copy.py "$OUT/timeline_copy.json.gz" 256
t copybound_bytes staged python3 samples/train_copybound.py --iters 10
t infer_d2h staged python3 samples/infer_d2h.py --iters 10

# (c) PyTorch: identical losses with and without the shim (deterministic algorithms): the default
# (which elides syncs, and must have: its summary is checked), PINWHEEL_SYNC=keep, PINWHEEL_DEFER=0.
# ResNet-50 uses cuDNN, whose handles hold pinned memory (their error storage): that keeps no
# sync (shim/front/cudnn.c), so none may be kept for reason mapped
losses() { python3 samples/train_naive.py --deterministic --batch 32 --size 96 --iters 20 --warmup 0 "$@" | grep '^losses'; }
t torch_losses_identical bash -c "
  $(declare -f losses)
  rm -f $OUT/losses_default.json
  a=\$(losses) && b=\$(PINWHEEL_MODE=stage PINWHEEL_MIN_BYTES=1 PINWHEEL_STATS=1 PINWHEEL_STATS_FORMAT=json \
    PINWHEEL_STATS_FILE=$OUT/losses_default.json LD_PRELOAD=$LIB losses) &&
  c=\$(PINWHEEL_MODE=stage PINWHEEL_MIN_BYTES=1 PINWHEEL_SYNC=keep LD_PRELOAD=$LIB losses) &&
  d=\$(PINWHEEL_MODE=stage PINWHEEL_DEFER=0 PINWHEEL_MIN_BYTES=1 LD_PRELOAD=$LIB losses) &&
  echo \"without:   \$a\"; echo \"default:   \$b\"; echo \"sync keep: \$c\"; echo \"no defer:  \$d\";
  [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ] && [ \"\$a\" = \"\$c\" ] && [ \"\$a\" = \"\$d\" ] &&
  python3 tests/gpu/check_elide.py $OUT/losses_default.json --elided --never mapped"

# (c2) sync elision (the default): a cudaStreamSynchronize right after a staged copy returns early,
# and a correct program must not see it.  elide_check's subtests under the shim, one process each,
# 5 rounds (every copy staged), their summaries checked: those whose syncs may elide (the copy's
# destination read at once from another stream, another thread, cuBLAS, the legacy stream; the
# runtime's and driver's queries) fail unless some sync was elided (else they
# tested nothing); those whose syncs must be kept (a pinned D2H copy, a kernel writing mapped
# memory, a host function queued before the sync, a wait for an event that may have got a
# destroyed one's handle; any sync after an IPC export) fail on any
# elided one, and on no kept one of their reason where the summary counts them.  The program
# itself compares every byte; it runs without the shim (the reference: the program is right),
# all subtests in one process under the default, and under PINWHEEL_SYNC=keep (none elided).
elide_case() { # elide_case SUBTEST CHECK-ARGS...
  local n=$1
  shift
  t elide_$n bash -c "$helpers; rm -f $OUT/elide_$n.json
    stage env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/elide_$n.json \
      $B/elide_check $n 5 && python3 tests/gpu/check_elide.py $OUT/elide_$n.json --rounds 5 $*"
}
for n in other_stream other_thread cublas legacy queries; do elide_case $n --elided; done
elide_case d2h_pinned --kept host_write,mapped
elide_case mapped_kernel --kept mapped
elide_case host_func --kept host_write
elide_case ipc --kept ipc
elide_case event_reuse --kept host_write
t elide_check_reference $B/elide_check all 3
t elide_check_all_default bash -c "$helpers; staged $B/elide_check all 3"
t elide_check_all_keep bash -c "$helpers; rm -f $OUT/elide_keep.json
  stage env PINWHEEL_SYNC=keep PINWHEEL_STATS_FORMAT=json \
    PINWHEEL_STATS_FILE=$OUT/elide_keep.json $B/elide_check all 3 &&
  python3 tests/gpu/check_elide.py $OUT/elide_keep.json --none"
# PyTorch: blocking x.to('cuda') right after a long matmul chain, the result read at once on a
# side stream and from another thread, the stream and an earlier event queried (every byte
# compared by the script); elision must have happened (the summary)
t torch_elide bash -c "$helpers; rm -f $OUT/torch_elide.json
  stage env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/torch_elide.json \
    python3 tests/gpu/torch_elide.py && python3 tests/gpu/check_elide.py $OUT/torch_elide.json --elided"

# (d) compute-sanitizer on the C sample under the shim
for tool in memcheck racecheck synccheck; do
  t sanitizer_$tool bash -c "
    env PINWHEEL_MODE=stage LD_PRELOAD=$LIB compute-sanitizer --tool $tool --error-exitcode 9 \
      $B/naive_copy 8 4 1 2>&1 | tee /dev/stderr | grep -Eq 'ERROR SUMMARY: 0 errors|SUMMARY: 0 hazards displayed \\(0 errors'"
done

# (e) graphs, DataLoader workers (fork), the launcher
t torch_graph staged python3 tests/gpu/torch_graph.py
for m in off stage; do
  t torch_profiler_$m env PINWHEEL_MODE=$m LD_PRELOAD="$LIB" python3 tests/gpu/torch_profiler.py
done
# the handoff: pinwheel traces until the program's torch.profiler registers, then its file is
# complete and the profiler works (twice); the copies before the handoff are staged (the first
# copy sets the pool up)
t torch_profiler_handoff bash -c "
  $B/pinwheel run --mode stage --trace $OUT/trace_handoff.json -- python3 tests/gpu/torch_profiler.py \
    >$OUT/handoff.out 2>&1; rc=\$?; cat $OUT/handoff.out; [ \$rc = 0 ] &&
  grep -q 'starts its own CUPTI profiler' $OUT/handoff.out &&
  python3 tests/gpu/check_trace.py $OUT/trace_handoff.json stage 5"
# the same on the real CUPTI with a client that asks for kernel records only, enabled after it
# registers (as Kineto) or before (as NVIDIA's samples): it gets those and no record of a kind
# pinwheel had enabled; and the client under the shim untraced
for f in after first; do
  arg=$([ $f = first ] && echo enable-first)
  t cupti_client_handoff_$f bash -c "
    $B/pinwheel run --mode stage --trace $OUT/trace_client_$f.json -- \
      $B/cupti_client $arg >$OUT/client_$f.out 2>&1; rc=\$?
    cat $OUT/client_$f.out; [ \$rc = 0 ] && grep -q 'starts its own CUPTI profiler' $OUT/client_$f.out &&
    python3 tests/gpu/check_trace.py $OUT/trace_client_$f.json stage 3"
done
t cupti_client_untraced bash -c "$helpers; staged $B/cupti_client"
t torch_dataloader_fork staged python3 tests/gpu/torch_dataloader.py
# batches of 48 MiB: each drop's unmap moved off the training thread (engine/unmap.c), bytes intact
# (needs /dev/shm room for the batches in flight and four times the queue: about 1.2 GiB)
t torch_dataloader_unmap bash -c "$helpers; set -o pipefail; staged python3 tests/gpu/torch_dataloader.py \
  --batch 64 --size 256 --samples 768 | tee /dev/stderr | grep -E 'unmapped off the calling thread: [1-9]' >/dev/null"
t launcher bash -c "LD_LIBRARY_PATH=$B/extra:\${LD_LIBRARY_PATH:-} $B/pinwheel run --stats -- $B/naive_copy 16 5 1 2>&1 | tee /dev/stderr | grep -q 'staged copies'"

# (f) the driver front end: programs built with the static CUDA runtime (nvcc's default), JAX
t static_observe bash -c "
  env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/observe_static.json \
    PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB $B/naive_copy_static 64 20 2 &&
  python3 tests/gpu/check_observe.py naive_copy_static $OUT/observe_static.json 23 64 &&
  env PINWHEEL_MODE=observe PINWHEEL_STATS=1 LD_PRELOAD=$LIB $B/naive_copy_static 64 20 2"
t static_torture staged "$B/copy_torture_static" 8 1250 512 1
t static_bw_bytes staged "$B/copy_bw_static" 256
t static_sanitizer_memcheck bash -c "
  env PINWHEEL_MODE=stage LD_PRELOAD=$LIB compute-sanitizer --tool memcheck --error-exitcode 9 \
    $B/naive_copy_static 8 4 1 2>&1 | tee /dev/stderr | grep -q 'ERROR SUMMARY: 0 errors'"
# traces in every mode (pinwheel run --trace): naive_copy (23 copies of 64 MiB) and a short
# PyTorch loop (train_small.py), each file complete and valid, staged copies marked in stage mode
for m in off observe stage; do
  t trace_naive_copy_$m bash -c "$B/pinwheel run --mode $m --trace $OUT/trace_naive_copy_$m.json.gz \
      -- $B/naive_copy 64 20 2 && python3 tests/gpu/check_trace.py $OUT/trace_naive_copy_$m.json.gz $m 20 23"
  t trace_torch_$m bash -c "$B/pinwheel run --mode $m --trace $OUT/trace_torch_$m.json \
      -- python3 samples/train_small.py --iters 10 &&
    python3 tests/gpu/check_trace.py $OUT/trace_torch_$m.json $m 10"
done

# the capture window: iterations 5-9 of the copy-bound loop (256 MiB batches), found by the shim
# in every mode, hold exactly five input copies and the report infers five steps; a profiler
# range around iterations 4-6 holds three; a delay and a duration bound the file
for m in off stage; do
  t trace_steps_$m bash -c "$B/pinwheel run --mode $m --trace $OUT/trace_steps_$m.json.gz \
      --trace-steps 5-9 -- python3 samples/train_copybound.py --iters 12 --warmup 0 &&
    python3 tests/gpu/check_window.py $B/pinwheel $OUT/trace_steps_$m.json.gz 5 268435456"
  t trace_profiler_range_$m bash -c "$B/pinwheel run --mode $m --trace $OUT/trace_prof_$m.json \
      --trace-capture cudaProfilerApi -- python3 tests/gpu/profiler_range.py &&
    python3 tests/gpu/check_window.py $B/pinwheel $OUT/trace_prof_$m.json 3 67108864"
done

# a driver-API program that releases its primary context (freed: pinwheel holds no reference of
# its own then) and copies under a context from cuCtxCreate (left to CUDA: other_context), bytes
# compared by the program
t ctx_release bash -c "$helpers; staged $B/ctx_release 64 | tee /dev/stderr | grep -q 'other_context'"

# cudaDeviceReset mid-run: every byte right, and the copies after the reset staged again
# (every eligible copy is staged: 8 before and 8 after; the summary counts 1 reset), their syncs
# elided with events made after the reset (none kept for a failed record; an event of an elision
# before the reset, recorded again after it, once crashed inside CUDA, with the 64 MiB default pool of
# then): 16 and 64 MiB copies with the default pool, 64 MiB ones with 80 MiB
t reset_resumes bash -c "
  for run in '64 default' '16 default' '64 80M'; do
    set -- \$run
    pool=\${2/default/}
    env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/reset_\$1_\$2.json \\
      \${pool:+PINWHEEL_HOST_POOL=\$pool} PINWHEEL_MODE=stage PINWHEEL_STATS=1 LD_PRELOAD=$LIB \\
      $B/reset_copy \$1 8 || exit 1
    python3 -c \"
import json, sys
s = json.loads(open('$OUT/reset_\$1_\$2.json').read().splitlines()[-1])
st = s['staging']
staged = st['ring']['calls'] + st['pinned_only']['calls']
print('\$run: resets', st['device_resets'], 'H2D staged', staged, 'syncs elided',
      st['sync_elided'], 'kept', s['sync_kept'])
sys.exit(0 if st['device_resets'] == 1 and staged >= 16 and st['sync_elided'] >= 2 and
         s['sync_kept']['error'] == 0 else 1)\" || exit 1
  done"

# copies on different streams stay independent: thread B's H2D on its own stream while thread A's
# D2H waits behind a 300 ms kernel; B's median under pinwheel within 1.2 x (+1 ms) of CUDA's alone
t two_streams_independent bash -c "
  $helpers
  base=\$($B/two_streams 64 300 | tee /dev/stderr | sed -n 's/.*median \\([0-9.]*\\) ms.*/\\1/p')
  out=\$(staged $B/two_streams 64 300) || { echo \"\$out\"; exit 1; }
  echo \"\$out\"
  under=\$(echo \"\$out\" | sed -n 's/.*median \\([0-9.]*\\) ms.*/\\1/p')
  echo \"without pinwheel \$base ms, under pinwheel \$under ms\"
  python3 -c \"import sys; b, u = float('\$base'), float('\$under'); sys.exit(0 if u <= 1.2 * b + 1.0 else 1)\""

# the driver's copy functions taken from the shared runtime (cudaGetDriverEntryPointByVersion)
t entry_point_copy staged $B/entry_point_copy 64
# uploads ahead (PINWHEEL_FILL_AHEAD) on CuPy's pattern in C: copies made from uploads, and a
# kernel's write through the device mapping, the program's write, a memset and a host function
# between fill and copy each giving theirs up, bytes checked after every copy
t fill_ahead_hazards bash -c "
  out=\$(env PINWHEEL_MODE=stage PINWHEEL_STATS=1 PINWHEEL_FILL_AHEAD=512M LD_PRELOAD=$LIB \
    $B/pinned_fill 256 3 2>&1); echo \"\$out\"
  for want in 'bytes ok' 'its copies made from them [1-9]' 'launch 1' 'written_freed_or_fork 1' \
      'memset_or_copy 1' 'stream_ordered 1'; do
    grep -qE \"\$want\" <<<\"\$out\" || { echo \"missing: \$want\"; exit 1; }
  done"
# a forked child and its parent's pinned memory: shared, writes included, as CUDA has it, without
# pinwheel and under it; with fill-ahead the memory is pinwheel's, which a child does not get
# (README): the child is killed touching it (exit 2), the parent's bytes stay right
t fork_pinned_shared bash -c "$B/fork_pinned && env PINWHEEL_MODE=stage LD_PRELOAD=$LIB $B/fork_pinned"
t fork_pinned_fill_ahead bash -c "
  env PINWHEEL_MODE=stage PINWHEEL_FILL_AHEAD=512M LD_PRELOAD=$LIB $B/fork_pinned; rc=\$?
  echo \"exit \$rc\"; [ \$rc -eq 2 ]"
if python3 -c "import jax" 2>/dev/null; then
  # pinwheel stages JAX's copies (XLA's own staging off in stage mode)
  t jax_bytes staged python3 samples/jax_put.py --sizes
  t jax_put_bytes staged python3 samples/jax_put.py --mib 256 --reps 3
  t jax_copybound_bytes staged python3 samples/jax_copybound.py --iters 6 --check
  t jax_torch_one_process bash -c "
    env PINWHEEL_STATS_FORMAT=json PINWHEEL_STATS_FILE=$OUT/jax_torch.json \
      PINWHEEL_MODE=stage PINWHEEL_STATS=1 LD_PRELOAD=$LIB python3 tests/gpu/jax_torch.py run &&
    python3 tests/gpu/jax_torch.py --check $OUT/jax_torch.json"
else
  echo "SKIP jax_* (jax is not installed)"
fi

# (h) real libraries nobody here wrote, each skipped when its package is missing.  CuPy stages
# cp.asarray itself through the runtime (cudaHostAlloc'd pool, NumPy's memmove, then the DMA): its
# memmove must run on pinwheel's threads; numba goes through the driver API; PyTorch's own pinned
# paths are recorded as the program's pinned memory and must stay right; transformers and
# Lightning must give the same losses with and without pinwheel
have() { python3 -c "import $1" 2>/dev/null || { echo "SKIP $2 ($1 is not installed)"; return 1; }; }
if have cupy 'cupy_*'; then
  t cupy_bytes staged python3 samples/cupy_put.py --sizes
  # uploads ahead of CuPy's copies (PINWHEEL_FILL_AHEAD): bytes of every size and dtype, and the
  # 256 MiB run's copies made from uploads
  t cupy_fill_ahead_bytes env PINWHEEL_FILL_AHEAD=512M bash -c "$helpers; staged python3 samples/cupy_put.py --sizes"
  t cupy_fill_ahead_used bash -c "
    out=\$(env PINWHEEL_MODE=stage PINWHEEL_STATS=1 PINWHEEL_FILL_AHEAD=512M LD_PRELOAD=$LIB \
      python3 samples/cupy_put.py --reps 3 2>&1); echo \"\$out\"
    grep -q 'bytes ok' <<<\"\$out\" && grep -qE 'its copies made from them [1-9]' <<<\"\$out\""
  t cupy_put_host_copies bash -c "set -o pipefail
    env PINWHEEL_MODE=stage PINWHEEL_STATS=1 LD_PRELOAD=$LIB python3 samples/cupy_put.py --reps 3 2>&1 |
      tee /dev/stderr | grep -q 'memcpy into its pinned memory [1-9]'"
fi
if have numba.cuda 'numba_*'; then
  t numba_bytes staged python3 samples/numba_put.py --sizes
  t numba_put_bytes staged python3 samples/numba_put.py --mib 256 --reps 3
fi
t torch_pin_bytes stage python3 samples/torch_pin.py --mib 256 --reps 3
if have transformers 'hf_*'; then
  hf() { python3 samples/hf_finetune.py --steps 12 --warmup 2 "$@" | grep '^losses'; }
  t hf_losses_identical bash -c "
    $(declare -f hf)
    a=\$(hf) && b=\$(PINWHEEL_MODE=stage PINWHEEL_MIN_BYTES=1 LD_PRELOAD=$LIB hf) &&
    echo \"without: \$a\"; echo \"stage:   \$b\"; [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
fi
if have lightning 'lightning_*'; then
  t lightning_bytes staged python3 samples/lightning_fit.py --steps 20 --warmup 5 --check
  lf() { python3 samples/lightning_fit.py --steps 30 --warmup 5 "$@" | grep -o 'final loss .*'; }
  t lightning_loss_identical bash -c "
    $(declare -f lf)
    a=\$(lf) && b=\$(PINWHEEL_MODE=stage LD_PRELOAD=$LIB lf) &&
    echo \"without: \$a\"; echo \"stage:   \$b\"; [ -n \"\$a\" ] && [ \"\$a\" = \"\$b\" ]"
fi

# (g) with two GPUs: copies to both from threads; a DDP job of a rank per GPU (tests/gpu/ddp_check.py)
# staged with the ranks' parameters agreeing, its summaries (one per rank, none from the launcher
# or the DataLoader's forked workers, the staging threads divided among the ranks) and its traces
# (one complete file per rank, each with its own device's kernels, NCCL's among them)
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
if [ "$ngpu" -ge 2 ]; then
  ddp="python3 -m torch.distributed.run --standalone --nproc-per-node $ngpu samples/train_ddp.py"
  ddp="$ddp --model resnet18 --batch 64 --iters 6 --warmup 2"
  for v in plain loader; do
    args=$([ $v = loader ] && echo --loader-workers 2)
    t ddp_staged_$v bash -c "set -o pipefail; rm -rf $OUT/ddp_$v; mkdir -p $OUT/ddp_$v/sum &&
      env PINWHEEL_MODE=stage PINWHEEL_STATS=1 PINWHEEL_STATS_FORMAT=json \
        PINWHEEL_STATS_FILE=$OUT/ddp_$v/sum/s-%p.json LD_PRELOAD=$LIB $ddp $args 2>&1 |
        tee /dev/stderr | grep 'params agree' &&
      python3 tests/gpu/ddp_check.py summaries $OUT/ddp_$v/sum $ngpu"
    t ddp_traced_$v bash -c "set -o pipefail; rm -rf $OUT/ddp_$v/trace; mkdir -p $OUT/ddp_$v/trace &&
      $B/pinwheel run --trace $OUT/ddp_$v/trace/rank%r.json.gz -- $ddp $args 2>&1 |
        tee /dev/stderr | grep 'params agree' &&
      python3 tests/gpu/ddp_check.py traces $OUT/ddp_$v/trace $ngpu"
  done
  t two_gpus stage python3 -c "
import torch, threading
def w(d):
    for i in range(50):
        x = torch.randn(1 << 22)
        y = x.to(f'cuda:{d}')
        assert torch.equal(y.cpu(), x)
ts = [threading.Thread(target=w, args=(d % 2,)) for d in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]; print('two gpus ok')"
fi

echo "gpu tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
