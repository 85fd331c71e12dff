#!/usr/bin/env bash
# The shim and the analyzer cross-built for aarch64 with Debian's cross compiler, and the CPU
# tests that need no CUDA (options, copy routines and pool, the engine on the simulator, the
# driver front end on a fake libcuda) run under qemu-user.  Installs what it needs when run as
# root (adds the arm64 architecture to dpkg).
#   bash tests/cross_aarch64.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-arm64}
. scripts/need.sh
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  if [ "$(id -u)" = 0 ]; then dpkg --add-architecture arm64; else
    echo "as root: dpkg --add-architecture arm64" >&2; exit 1; fi
fi
need file gcc-aarch64-linux-gnu qemu-user libc6-dev-arm64-cross libcmocka-dev:arm64 libyajl-dev:arm64 \
  zlib1g-dev:arm64 libsqlite3-dev:arm64
find_cuda
cmake -S . -B "$out" --toolchain cmake/aarch64-linux-gnu.cmake -DPINWHEEL_SAMPLES=OFF \
  -DPINWHEEL_SANITIZE=OFF -DPINWHEEL_WERROR=ON -DCMAKE_BUILD_TYPE=Release
cmake --build "$out" -j"$(nproc)"
file "$out/libpinwheel.so" "$out/pinwheel" | sed 's/, BuildID.*//'
# the driver front end too: its dlsym is hand-written assembly for each architecture
PW_TEST_UNDER_QEMU=1 PW_TEST_EMULATOR=qemu-aarch64 ctest --test-dir "$out" --output-on-failure \
  -R '^(options|copy_pool|engine_sim|driver)$'
