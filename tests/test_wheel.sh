#!/usr/bin/env bash
# The wheel (pyproject.toml, packaging/pep517/): built by pip with no package index (the in-tree
# backend, in pip's isolated build environment) into a fresh venv, and used from there:
# `pinwheel --version` and `python -m pinwheel --version` say the project's version, `pinwheel
# report` reads a torch.profiler trace (yajl, zlib) and an Nsight Systems one (SQLite), every ELF
# file installed needs nothing but glibc (and no CUDA library), `pinwheel run --stats` preloads the
# package's libpinwheel.so in front of a program on the fake runtime and stages its copies,
# `pinwheel run --trace` points NVTX at the package's libpinwheel_nvtx.so, and PINWHEEL_LIBRARY
# set by the user wins.  Also the sdist: the tracked files and PKG-INFO.
#   tests/test_wheel.sh BUILD_DIR    (a regular build tree: its tests/fake runtime and interpose_prog)
#   PYTHON=python3.11 tests/test_wheel.sh build    (the interpreter of the venv; python3 by default)
# Run as root on Debian, it installs python3-venv if missing (scripts/need.sh).  CI runs it.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: tests/test_wheel.sh BUILD_DIR}" && pwd)
py=${PYTHON:-python3}
cd "$src"
. scripts/need.sh
need python3-venv cmake
find_cuda
fail() {
  echo "test_wheel: FAILED: $*" >&2
  exit 1
}
t0=$SECONDS
version=$(sed -nE 's/^project\(pinwheel VERSION ([0-9.]+).*/\1/p' CMakeLists.txt)
[ -n "$version" ] || fail "no project(pinwheel VERSION ...) in CMakeLists.txt"
prog=$(find "$build" -name interpose_prog -type f -perm -u+x | head -n 1)
[ -n "$prog" ] || fail "no interpose_prog in $build (build it first: cmake --build $build)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# pip sees no configuration of this machine (no index, no find-links): only the tree
export PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
"$py" -m venv "$work/venv" || fail "$py -m venv failed (Debian: apt-get install python3-venv)"
venv=$work/venv
# --- the wheel, by pip (prepare_metadata_for_build_wheel, then build_wheel) ---
if ! "$venv/bin/python" -m pip wheel --no-index --no-deps -w "$work/dist" . >"$work/pip-wheel.log" 2>&1; then
  tail -n 40 "$work/pip-wheel.log"
  fail "pip wheel --no-index . did not build the wheel"
fi
whl=$work/dist/pinwheel-$version-py3-none-linux_$(uname -m).whl
[ -f "$whl" ] || { ls -l "$work/dist"; fail "no $(basename "$whl")"; }
echo "built $(basename "$whl") ($(($(stat -c %s "$whl") / 1024)) KiB) in $((SECONDS - t0)) s"
# RECORD: every file with its sha256 and size, nothing missing; the console script declared
"$venv/bin/python" - "$whl" "$version" <<'EOF' || fail "the wheel's RECORD or metadata is wrong"
import base64, hashlib, sys, zipfile
whl, version = sys.argv[1], sys.argv[2]
di = "pinwheel-%s.dist-info/" % version
z = zipfile.ZipFile(whl)
names = set(z.namelist())
rows = [l.split(",") for l in z.read(di + "RECORD").decode().splitlines()]
seen = set()
for name, digest, size in rows:
    seen.add(name)
    if name == di + "RECORD":
        continue
    data = z.read(name)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == want and int(size) == len(data), "RECORD is wrong for " + name
assert seen == names, "RECORD and the archive differ: %s" % sorted(seen ^ names)
for f in ("pinwheel/__init__.py", "pinwheel/__main__.py", "pinwheel/_native/pinwheel",
          "pinwheel/_native/libpinwheel.so", "pinwheel/_native/libpinwheel_nvtx.so",
          di + "METADATA", di + "WHEEL", di + "entry_points.txt"):
    assert f in names, "the wheel lacks " + f
assert z.getinfo("pinwheel/_native/pinwheel").external_attr >> 16 & 0o111, "pinwheel is not executable"
assert "pinwheel = pinwheel:main" in z.read(di + "entry_points.txt").decode()
meta = z.read(di + "METADATA").decode()
assert "\nName: pinwheel\n" in meta and "\nVersion: %s\n" % version in meta, "METADATA"
wheel = z.read(di + "WHEEL").decode()
assert "Root-Is-Purelib: false" in wheel and "Tag: py3-none-linux_" in wheel, "WHEEL"
print("the wheel's RECORD holds its %d files with their sha256; METADATA, WHEEL, entry_points.txt" % len(names))
EOF
"$venv/bin/python" -m pip install --no-index "$whl" >"$work/pip-install.log" 2>&1 ||
  { cat "$work/pip-install.log"; fail "pip install of the wheel failed"; }
pkg=$("$venv/bin/python" -c 'import os, pinwheel; print(os.path.dirname(pinwheel.__file__))') ||
  fail "the venv cannot import pinwheel"
case "$pkg" in "$venv"/*) ;; *) fail "pinwheel imported from $pkg, not from the venv" ;; esac
# --- every installed ELF file: glibc's libraries alone, and no CUDA library ---
for f in "$pkg"/_native/pinwheel "$pkg"/_native/libpinwheel.so "$pkg"/_native/libpinwheel_nvtx.so; do
  needed=$(readelf -d "$f" | sed -nE 's/.*\(NEEDED\).*\[(.*)\]/\1/p' | tr '\n' ' ')
  echo "NEEDED of $(basename "$f"): $needed"
  for n in $needed; do
    case "$n" in
      libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux*.so.*) ;;
      *) fail "$(basename "$f") needs $n: the wheel's files must need nothing but glibc" ;;
    esac
  done
done
# --- the commands ---
v=$("$venv/bin/pinwheel" --version) || fail "pinwheel --version failed"
[ "$v" = "pinwheel $version" ] || fail "pinwheel --version says '$v', expected 'pinwheel $version'"
v=$("$venv/bin/python" -m pinwheel --version) || fail "python -m pinwheel --version failed"
[ "$v" = "pinwheel $version" ] || fail "python -m pinwheel --version says '$v'"
echo "pinwheel --version and python -m pinwheel --version: $v"
[ -f "$venv/share/man/man1/pinwheel.1.gz" ] || fail "the man page is not in the venv's share/man/man1"
for trace in tests/fixtures/kineto_naive.json.gz fuzz/corpus/nsys/synthetic.sqlite; do
  out=$("$venv/bin/pinwheel" report "$trace" 2>&1) || { echo "$out"; fail "pinwheel report $trace failed"; }
  grep -qE "^pinwheel report: .*\((torch.profiler/Kineto|Nsight Systems), [0-9]+ GPU operations\)" <<<"$out" ||
    { echo "$out"; fail "pinwheel report $trace printed no report"; }
  grep -q "^H2D: " <<<"$out" || { echo "$out"; fail "pinwheel report $trace has no H2D line"; }
done
echo "pinwheel report reads a torch.profiler trace and an Nsight Systems one"
# --- pinwheel run: the package's shim in the process, staging a program on the fake runtime ---
# shellcheck disable=SC2016 # $$ and $0 are the inner shell's
out=$("$venv/bin/pinwheel" run --stats --mode stage -- sh -c \
  'grep -m1 -oE "/[^ ]*/libpinwheel\.so$" /proc/$$/maps; exec "$0" stage' \
  "$prog" 2>&1) || { echo "$out"; fail "pinwheel run --stats failed"; }
loaded=$(head -n 1 <<<"$out")
[ "$loaded" = "$pkg/_native/libpinwheel.so" ] ||
  { echo "$out"; fail "the process mapped '$loaded', not the package's $pkg/_native/libpinwheel.so"; }
grep -q "summary (pinwheel $version, mode stage)" <<<"$out" || { echo "$out"; fail "no summary from the shim"; }
grep -qE '^ +ring +[1-9]' <<<"$out" || { echo "$out"; fail "the package's shim staged nothing"; }
echo "pinwheel run --stats: $loaded loaded, the program's copies staged"
# shellcheck disable=SC2016
nvtx=$("$venv/bin/pinwheel" run --trace "$work/t.json" -- sh -c 'echo "$NVTX_INJECTION64_PATH"')
[ "$nvtx" = "$pkg/_native/libpinwheel_nvtx.so" ] || fail "a traced run set NVTX_INJECTION64_PATH='$nvtx'"
echo "pinwheel run --trace: NVTX_INJECTION64_PATH=$nvtx"
# shellcheck disable=SC2016
pre=$(PINWHEEL_LIBRARY="$build/libpinwheel.so" "$venv/bin/pinwheel" run -- sh -c 'echo "$LD_PRELOAD"')
[ "$pre" = "$build/libpinwheel.so" ] || fail "PINWHEEL_LIBRARY set by the user was not kept (LD_PRELOAD=$pre)"
echo "PINWHEEL_LIBRARY set by the user is kept"
# --- the sdist: the tracked files, and PKG-INFO ---
sdist=$("$py" -c 'import sys; sys.path.insert(0, "packaging/pep517"); import pinwheel_build as b
print(b.build_sdist(sys.argv[1]))' "$work/sdist") || fail "build_sdist failed"
[ "$sdist" = "pinwheel-$version.tar.gz" ] || fail "the sdist is named $sdist"
if [ -e .git ] && command -v git >/dev/null; then
  diff <(git ls-files | sed "s|^|pinwheel-$version/|"; echo "pinwheel-$version/PKG-INFO") \
    <(tar -tzf "$work/sdist/$sdist") >"$work/sdist.diff" || { head -n 20 "$work/sdist.diff"; fail "the sdist is not the tracked files"; }
fi
echo "sdist $sdist: $(tar -tzf "$work/sdist/$sdist" | wc -l) files"
echo "test_wheel: passed in $((SECONDS - t0)) s"
