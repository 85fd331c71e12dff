#!/usr/bin/env bash
# GPU recordings that the analyzer's checks read back on a CPU machine (the GPU machine need not
# have the analyzer's libraries), packed into $REC.tgz:
#   resnet256_{naive,pinwheel}.json.gz  torch.profiler traces of ResNet-50, batch 256, bf16, 8
#       profiled steps, without and under pinwheel, trimmed (tests/ref/trim_trace.py
#       --keep-cpu-ops): the what-if pair of tests/fixtures/pairs
#   r50_{off,stage}.json.gz  the collector's traces (NVTX ranges included, as `pinwheel run --trace`
#       records them) of ResNet-50, 12 steps, --mode off and stage: inferred steps against the
#       NVTX steps train_step#N of the same trace
#   sizes.txt  the collector's .json.gz of ResNet-50 under pinwheel, 20 and 120 timed steps: bytes
#       and wall seconds of each, for the trace's size per minute of training
#   B=build-dev REC=out/rec bash tests/gpu/record.sh
set -u
B=${B:-build-dev}
REC=${REC:-out/rec}
mkdir -p "$REC"
lib=$B/libpinwheel.so
nvtx=$B/libpinwheel_nvtx.so
r50=(python3 samples/train_naive.py --batch 256)
for side in naive pinwheel; do
  pre=()
  [ $side = pinwheel ] && pre=(env LD_PRELOAD=$lib)
  "${pre[@]}" "${r50[@]}" --iters 8 --warmup 6 --profile "$REC/raw_$side.json.gz" >"$REC/resnet256_$side.log" 2>&1 &&
    python3 tests/ref/trim_trace.py --keep-cpu-ops "$REC/raw_$side.json.gz" "$REC/resnet256_$side.json.gz"
  echo "resnet256_$side: $? $(tail -n 1 "$REC/resnet256_$side.log")"
  rm -f "$REC/raw_$side.json.gz"
done
for m in off stage; do
  env LD_PRELOAD=$lib PINWHEEL_MODE=$m PINWHEEL_TRACE="$REC/r50_$m.json.gz" NVTX_INJECTION64_PATH=$nvtx \
    "${r50[@]}" --iters 12 --warmup 4 >"$REC/r50_$m.log" 2>&1
  echo "r50_$m: $? $(tail -n 1 "$REC/r50_$m.log")"
done
for n in 20 120; do
  t0=$EPOCHREALTIME
  env LD_PRELOAD=$lib PINWHEEL_TRACE="$REC/size_$n.json.gz" NVTX_INJECTION64_PATH=$nvtx \
    "${r50[@]}" --iters $n --warmup 8 >"$REC/size_$n.log" 2>&1
  rc=$?
  t1=$EPOCHREALTIME
  echo "iters $n rc $rc bytes $(stat -c %s "$REC/size_$n.json.gz" 2>/dev/null || echo 0)" \
    "wall_s $(awk "BEGIN{print $t1 - $t0}") $(tail -n 1 "$REC/size_$n.log")" | tee -a "$REC/sizes.txt"
  rm -f "$REC/size_$n.json.gz"
done
tar czf "$REC.tgz" -C "$(dirname "$REC")" "$(basename "$REC")" && rm -rf "$REC"
ls -l "$REC.tgz"
