# Cross build for 64-bit Arm (NVIDIA Grace) with Debian's cross compiler, tests run under qemu-user:
#   cmake -S . -B build-arm64 --toolchain cmake/aarch64-linux-gnu.cmake -DPINWHEEL_SAMPLES=OFF \
#     -DPINWHEEL_SANITIZE=OFF && cmake --build build-arm64 && ctest --test-dir build-arm64
# Needs: gcc-aarch64-linux-gnu qemu-user, and the arm64 -dev packages (dpkg --add-architecture
# arm64): libcmocka-dev:arm64 libyajl-dev:arm64 zlib1g-dev:arm64 libsqlite3-dev:arm64.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# qemu finds /lib/ld-linux-aarch64.so.1 of libc6:arm64 (pulled in by the arm64 -dev packages); with
# -L /usr/aarch64-linux-gnu it mixes in the cross glibc and hangs in the first pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
