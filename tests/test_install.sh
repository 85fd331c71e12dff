#!/usr/bin/env bash
# `pinwheel run` finds libpinwheel.so after `cmake --install` too (the build tree is tested by
# test_interpose): install into a temporary prefix, check the preload it sets up and that it loads.
# And the installed shim needs no CUDA library (a preload that did would break every process
# that lacks one): readelf shows no CUDA or CUPTI NEEDED entry; nor does libpinwheel_nvtx.so.
set -eu
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
out=$("$prefix/bin/pinwheel" run --mode observe -- sh -c 'echo "$LD_PRELOAD"; exit 5' 2>&1) && rc=0 || rc=$?
[ "$rc" = 5 ] || { echo "exit status $rc, expected 5"; exit 1; }
if readelf -d "$prefix"/lib*/libpinwheel.so | grep NEEDED | grep -iE 'cuda|cupti'; then
  echo "libpinwheel.so has a NEEDED entry on a CUDA library"
  exit 1
fi
case "$out" in
  "$prefix"/lib*/libpinwheel.so) echo "installed launcher preloads $out" ;;
  *) echo "unexpected LD_PRELOAD: $out"; exit 1 ;;
esac
# a traced run points NVTX at the installed libpinwheel_nvtx.so, beside the shim
nvtx=$("$prefix/bin/pinwheel" run --trace "$prefix/t.json" -- sh -c 'echo "$NVTX_INJECTION64_PATH"' 2>&1)
case "$nvtx" in
  "$(dirname "$out")"/libpinwheel_nvtx.so) echo "installed launcher points NVTX at $nvtx" ;;
  *) echo "unexpected NVTX_INJECTION64_PATH: $nvtx"; exit 1 ;;
esac
if readelf -d "$nvtx" | grep NEEDED | grep -iE 'cuda|cupti'; then
  echo "libpinwheel_nvtx.so has a NEEDED entry on a CUDA library"
  exit 1
fi
# the man page and the copyright file are installed too
for f in share/man/man1/pinwheel.1.gz share/doc/pinwheel/copyright share/doc/pinwheel/README.md \
         share/doc/pinwheel/docs/DESIGN.md; do
  [ -f "$prefix/$f" ] || { echo "cmake --install did not install $f"; exit 1; }
done
bash "$(dirname "$0")/check_doc_links.sh" "$prefix/share/doc/pinwheel"
echo "installed: the man page, the copyright file and the documentation"
