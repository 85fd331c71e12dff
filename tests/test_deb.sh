#!/usr/bin/env bash
# The Debian package: `cpack -G DEB` from the build tree's install rules; unpacked into a scratch
# root (dpkg -x): pinwheel and libpinwheel.so in the usual places, the analyzer's libraries
# declared as dependencies and no CUDA package, `pinwheel --version` the package's version, and
# `pinwheel run --stats` from there stages the copies of a program in front of the fake runtime;
# the man page is installed and says what the packaged --help says; the copyright file is Debian's
# machine-readable format.
#   test_deb.sh BUILD_DIR VERSION PROG
set -eu
build=$1
version=$2
prog=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$build" && cpack -G DEB -B "$work/out" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/pinwheel_*.deb)
echo "package: $(basename "$deb")"
[ "$(dpkg-deb -f "$deb" Package)" = pinwheel ] || { echo "wrong package name"; exit 1; }
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || { echo "package version $(dpkg-deb -f "$deb" Version), expected $version"; exit 1; }
deps=$(dpkg-deb -f "$deb" Depends)
echo "depends: $deps"
for d in libyajl2 zlib1g libsqlite3-0; do
  grep -qw "$d" <<<"$deps" || { echo "Depends lacks $d"; exit 1; }
done
if grep -qiE 'cuda|nvidia|cupti' <<<"$deps"; then echo "CUDA must not be a package dependency"; exit 1; fi
dpkg -x "$deb" "$work/root"
[ -x "$work/root/usr/bin/pinwheel" ] || { echo "no /usr/bin/pinwheel"; dpkg-deb -c "$deb"; exit 1; }
lib=$(ls "$work"/root/usr/lib/libpinwheel.so "$work"/root/usr/lib/*/libpinwheel.so 2>/dev/null | head -n 1)
[ -n "$lib" ] || { echo "no libpinwheel.so under /usr/lib"; dpkg-deb -c "$deb"; exit 1; }
[ -f "$(dirname "$lib")/libpinwheel_nvtx.so" ] || { echo "no libpinwheel_nvtx.so beside $lib"; dpkg-deb -c "$deb"; exit 1; }
man="$work/root/usr/share/man/man1/pinwheel.1.gz"
[ -f "$man" ] || { echo "no /usr/share/man/man1/pinwheel.1.gz"; dpkg-deb -c "$deb"; exit 1; }
python3 "$(dirname "$0")/test_man.py" "$work/root/usr/bin/pinwheel" "$man"
copyright="$work/root/usr/share/doc/pinwheel/copyright"
[ -f "$copyright" ] || { echo "no /usr/share/doc/pinwheel/copyright"; dpkg-deb -c "$deb"; exit 1; }
head -n 1 "$copyright" | grep -qx 'Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' ||
  { echo "the copyright file is not in Debian's machine-readable format"; exit 1; }
bash "$(dirname "$0")/check_doc_links.sh" "$work/root/usr/share/doc/pinwheel"
for field in Upstream-Name Files Copyright License; do
  grep -q "^$field: " "$copyright" || { echo "the copyright file lacks $field"; exit 1; }
done
v=$("$work/root/usr/bin/pinwheel" --version)
[ "$v" = "pinwheel $version" ] || { echo "--version says '$v', expected 'pinwheel $version'"; exit 1; }
out=$("$work/root/usr/bin/pinwheel" run --stats --mode stage -- "$prog" stage 2>&1)
grep -q "summary (pinwheel $version, mode stage)" <<<"$out" || { echo "$out"; echo "no summary from the packaged shim"; exit 1; }
grep -qE '^ +ring +[1-9]' <<<"$out" || { echo "$out"; echo "the packaged shim staged nothing"; exit 1; }
echo "the packaged pinwheel ($v) staged the program's copies through $lib"
