"""pinwheel's PEP 517 build backend: `pip install .` and `pip wheel .` with no package index.

It needs nothing but the standard library (pyproject.toml: `requires = []`, `backend-path`): the
wheel is the project's own CMake build (Release, no tests, no samples, the analyzer's yajl, zlib
and SQLite linked statically: -DPINWHEEL_STATIC_DEPS=ON) in a temporary directory, installed
into a scratch prefix, and its `pinwheel` program, `libpinwheel.so` and `libpinwheel_nvtx.so`
packed into the `pinwheel` Python package (`packaging/python/pinwheel/`, under `_native/`), with
the man page as data (`share/man/man1`).  The one version is `project(pinwheel VERSION ...)` of
CMakeLists.txt.  The sdist is a tar.gz of the tracked sources (`git ls-files`; from an unpacked
sdist, its files).

Config settings (`pip ... --config-settings cmake-args="-DCUDAToolkit_ROOT=/opt/cuda"`):
  cmake-args   more arguments for the CMake configure step (a string, split as a shell would)
The build's parallelism is CMAKE_BUILD_PARALLEL_LEVEL's when it is set, else one job per CPU.
"""

import base64
import glob
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile

NAME = "pinwheel"
SUMMARY = ("overlap the pageable host-to-device copies of unmodified CUDA programs with their "
           "compute")
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
PACKAGE = os.path.join(SOURCE, "packaging", "python", NAME)
# in the wheel: (where the scratch install put it, relative to its prefix; where it goes)
NATIVE = (("bin/pinwheel", NAME + "/_native/pinwheel"),
          ("LIBDIR/libpinwheel.so", NAME + "/_native/libpinwheel.so"),
          ("LIBDIR/libpinwheel_nvtx.so", NAME + "/_native/libpinwheel_nvtx.so"))
MANPAGE = "share/man/man1/pinwheel.1.gz"


class BuildError(Exception):
    pass


def _version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*pinwheel\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        raise BuildError("CMakeLists.txt has no project(pinwheel VERSION X.Y.Z)")
    return m.group(1)


def _dist_info(version):
    return "%s-%s.dist-info" % (NAME, version)


def _platform_tag():
    plat = sysconfig.get_platform()  # linux-x86_64, linux-aarch64
    if not plat.startswith("linux-"):
        raise BuildError("pinwheel builds for Linux only (this Python's platform: %s)" % plat)
    return re.sub(r"[^A-Za-z0-9]", "_", plat)


def _wheel_tag():
    return "py3-none-" + _platform_tag()


def _metadata(version):
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    head = [
        "Metadata-Version: 2.1",
        "Name: " + NAME,
        "Version: " + version,
        "Summary: " + SUMMARY,
        "License: all rights reserved (see the copyright file)",
        "License-File: copyright",
        "Platform: Linux",
        "Classifier: Environment :: GPU :: NVIDIA CUDA",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: C",
        "Requires-Python: >=3.7",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(head) + "\n\n" + readme


def _metadata_files(version):
    """The .dist-info files but RECORD: name -> bytes."""
    with open(os.path.join(SOURCE, "packaging", "copyright"), "rb") as f:
        copyright_text = f.read()
    wheel = ("Wheel-Version: 1.0\nGenerator: pinwheel_build %s\nRoot-Is-Purelib: false\n"
             "Tag: %s\n" % (version, _wheel_tag()))
    return {
        "METADATA": _metadata(version).encode("utf-8"),
        "WHEEL": wheel.encode("utf-8"),
        "entry_points.txt": b"[console_scripts]\npinwheel = pinwheel:main\n",
        "top_level.txt": b"pinwheel\n",
        "copyright": copyright_text,
    }


def _cmake_args(config_settings):
    extra = (config_settings or {}).get("cmake-args", "")
    if isinstance(extra, (list, tuple)):
        return [a for item in extra for a in shlex.split(item)]
    return shlex.split(extra)


def _run(what, cmd):
    sys.stderr.write("pinwheel_build: %s\n" % " ".join(shlex.quote(c) for c in cmd))
    sys.stderr.flush()
    # CMake's output on stderr: pip shows it when the build fails, and with -v
    rc = subprocess.call(cmd, stdout=sys.stderr.fileno())
    if rc != 0:
        raise BuildError("%s failed (exit status %d): see CMake's output above" % (what, rc))


def _build_native(tmp, config_settings):
    """Configure, build and install into tmp/prefix; returns {path in the wheel: file}."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise BuildError("the wheel is built with CMake, which is not on PATH "
                         "(Debian: apt-get install cmake make gcc pkg-config libyajl-dev "
                         "zlib1g-dev libsqlite3-dev, and the CUDA toolkit's headers)")
    build, prefix = os.path.join(tmp, "build"), os.path.join(tmp, "prefix")
    _run("CMake's configure step", [
        cmake, "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DPINWHEEL_TESTS=OFF",
        "-DPINWHEEL_SAMPLES=OFF", "-DPINWHEEL_STATIC_DEPS=ON", "-DCMAKE_INSTALL_PREFIX=" + prefix
    ] + _cmake_args(config_settings))
    jobs = [] if os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") else [
        "--parallel", str(os.cpu_count() or 1)]
    _run("the build", [cmake, "--build", build] + jobs)
    _run("the install", [cmake, "--install", build, "--prefix", prefix, "--strip"])
    # lib, lib64 or lib/<multiarch>: CMAKE_INSTALL_LIBDIR's
    shims = sorted(glob.glob(os.path.join(prefix, "lib*", "libpinwheel.so")) +
                   glob.glob(os.path.join(prefix, "lib*", "*", "libpinwheel.so")))
    if not shims:
        raise BuildError("the install put no libpinwheel.so under %s/lib*" % prefix)
    libdir = os.path.relpath(os.path.dirname(shims[0]), prefix)
    files = {}
    for src, dst in NATIVE:
        path = os.path.join(prefix, src.replace("LIBDIR", libdir))
        if not os.path.isfile(path):
            raise BuildError("the install has no %s" % path)
        files[dst] = path
    man = os.path.join(prefix, MANPAGE)
    if os.path.isfile(man):  # not when cross-built without an emulator
        files["%s-%s.data/data/%s" % (NAME, _version(), MANPAGE)] = man
    return files


def _date_time():
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    return time.gmtime(max(epoch, 315532800))[:6]  # a zip holds no date before 1980


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(path, entries):
    """entries: (name in the wheel, bytes, mode); RECORD is added last."""
    when = _date_time()
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name, when)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            record.append(_record_line(name, data))
        record_name = "%s/RECORD" % _dist_info(_version())
        record.append(record_name + ",,")
        info = zipfile.ZipInfo(record_name, when)
        info.external_attr = 0o100644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        zf.writestr(info, ("\n".join(record) + "\n").encode("utf-8"))


def _package_sources():
    """The Python package's files: relative name -> bytes."""
    out = {}
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            with open(os.path.join(PACKAGE, name), "rb") as f:
                out[name] = f.read()
    if "__init__.py" not in out:
        raise BuildError("%s has no __init__.py" % PACKAGE)
    return out


# ---- PEP 517 hooks ----


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    dist_info = os.path.join(metadata_directory, _dist_info(version))
    os.makedirs(dist_info, exist_ok=True)
    for name, data in _metadata_files(version).items():
        with open(os.path.join(dist_info, name), "wb") as f:
            f.write(data)
    return _dist_info(version)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    meta = _metadata_files(version)
    if metadata_directory:  # the .dist-info prepare_metadata_for_build_wheel wrote: this wheel's
        meta = {}
        for name in sorted(os.listdir(metadata_directory)):
            path = os.path.join(metadata_directory, name)
            if name != "RECORD" and os.path.isfile(path):
                with open(path, "rb") as f:
                    meta[name] = f.read()
    entries = []
    for name, data in _package_sources().items():
        entries.append(("%s/%s" % (NAME, name), data, 0o644))
    entries.append(("%s/_version.py" % NAME, ('version = "%s"\n' % version).encode(), 0o644))
    with tempfile.TemporaryDirectory(prefix="pinwheel-wheel-") as tmp:
        for dst, src in sorted(_build_native(tmp, config_settings).items()):
            with open(src, "rb") as f:
                data = f.read()
            entries.append((dst, data, 0o755 if os.access(src, os.X_OK) else 0o644))
    for name, data in meta.items():
        entries.append(("%s/%s" % (_dist_info(version), name), data, 0o644))
    os.makedirs(wheel_directory, exist_ok=True)
    filename = "%s-%s-%s.whl" % (NAME, version, _wheel_tag())
    _write_wheel(os.path.join(wheel_directory, filename), entries)
    return filename


def _tracked_files():
    """The sources: git's tracked files in a checkout, else (an unpacked sdist) every file."""
    if os.path.exists(os.path.join(SOURCE, ".git")) and shutil.which("git"):
        out = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z"], stdout=subprocess.PIPE,
                             check=True).stdout.decode("utf-8")
        return sorted(f for f in out.split("\0") if f and os.path.isfile(os.path.join(SOURCE, f)))
    files = []
    for root, dirs, names in os.walk(SOURCE):
        rel = os.path.relpath(root, SOURCE)
        dirs[:] = sorted(d for d in dirs if not (rel == "." and (d.startswith("build") or
                                                                  d.startswith(".")))
                         and d != "__pycache__")
        for n in names:
            f = os.path.normpath(os.path.join(rel, n))
            if f != "PKG-INFO":
                files.append(f)
    return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (NAME, version)
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, base + ".tar.gz")

    def norm(info):
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = mtime
        info.mode = 0o755 if info.mode & 0o111 else 0o644
        return info

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for f in _tracked_files():
            tf.add(os.path.join(SOURCE, f), arcname=base + "/" + f, recursive=False, filter=norm)
        pkg_info = _metadata(version).encode("utf-8")
        info = norm(tarfile.TarInfo(base + "/PKG-INFO"))
        info.size = len(pkg_info)
        tf.addfile(info, io.BytesIO(pkg_info))
    return base + ".tar.gz"
