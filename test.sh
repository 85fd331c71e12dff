#!/usr/bin/env bash
# pinwheel's tests on a fresh Debian 12 machine with the CUDA 13 toolkit: installs what they need
# (as root, with apt-get; otherwise says what to install), builds with warnings as errors, runs CTest.
#   ./test.sh            the README's test command (CI runs exactly this)
set -euo pipefail
cd "$(dirname "$0")"
. scripts/need.sh
need cmake make gcc g++ pkg-config libcmocka-dev libyajl-dev zlib1g-dev libsqlite3-dev \
  chromium clang-format python3
find_cuda
cmake -S . -B build -DPINWHEEL_WERROR=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure
