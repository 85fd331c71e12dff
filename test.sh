#!/usr/bin/env bash
# pinwheel's tests on a fresh Debian 12 machine with the CUDA 13 toolkit: installs what they need
# (as root, with apt-get; otherwise says what to install), builds with warnings as errors, runs CTest,
# and ends by saying that the GPU tests did not run and the command that runs them on a GPU machine.
#   ./test.sh            the README's test command (CI runs exactly this)
set -euo pipefail
cd "$(dirname "$0")"
. scripts/need.sh
need cmake make gcc g++ pkg-config libcmocka-dev libyajl-dev zlib1g-dev libsqlite3-dev \
  chromium clang-format python3
find_cuda
cmake -S . -B build -DPINWHEEL_WERROR=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure && rc=0 || rc=$?
# The GPU suite (tests/gpu/run.sh) is never part of this: say so, and how to run it on a GPU machine.
echo
echo "GPU tests: not run (./test.sh runs the tests that need no GPU; tests/gpu/ needs a CUDA GPU)."
if [ -x build/naive_copy ]; then
  echo "On a machine with a CUDA GPU, with this build (its samples are built), from the repository root:"
else
  echo "On a machine with a CUDA GPU, after a build with the samples (nvcc on PATH), from the repository root:"
fi
echo "  B=build OUT=out bash tests/gpu/run.sh"
exit "$rc"
