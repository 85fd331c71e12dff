#!/usr/bin/env bash
# The C sources follow .clang-format: clang-format --dry-run --Werror over every tracked .c/.h file.
#   test_format.sh SOURCE_DIR
set -eu
cd "$1"
command -v clang-format >/dev/null || { echo "clang-format is not installed (apt-get install clang-format)"; exit 1; }
files=$(git ls-files '*.c' '*.h' 2>/dev/null || find shim report cmd tests fuzz -name '*.[ch]')
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files
echo "$(echo "$files" | wc -w) files formatted as .clang-format says"
