"""pinwheel, as installed by pip: the `pinwheel` command and the preloaded libraries it ships.

The wheel carries the C build itself in `_native/`: the `pinwheel` program, `libpinwheel.so` (the
shim `pinwheel run` preloads) and `libpinwheel_nvtx.so` (the NVTX injection library of a traced
run, which `pinwheel run --trace` looks for beside the shim).  The `pinwheel` console script and
`python -m pinwheel` replace the Python process with that program, `PINWHEEL_LIBRARY` pointing at
the shim of this package unless it is set already.
"""

import os
import sys

from ._version import version as __version__

__all__ = ["binary", "library", "nvtx_library", "main", "__version__"]

_NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native")


def binary():
    """The path of the bundled `pinwheel` program."""
    return os.path.join(_NATIVE, "pinwheel")


def library():
    """The path of the bundled libpinwheel.so (what `LD_PRELOAD` takes, by hand)."""
    return os.path.join(_NATIVE, "libpinwheel.so")


def nvtx_library():
    """The path of the bundled libpinwheel_nvtx.so (what `NVTX_INJECTION64_PATH` takes)."""
    return os.path.join(_NATIVE, "libpinwheel_nvtx.so")


def main(argv=None):
    """Run the bundled `pinwheel` with these arguments (default: the command line's); does not
    return: the process becomes the program, whose exit status is then the command's."""
    args = sys.argv[1:] if argv is None else list(argv)
    prog = binary()
    if not os.access(prog, os.X_OK):
        sys.stderr.write("pinwheel: the package has no runnable %s (a broken install?)\n" % prog)
        return 127
    if not os.environ.get("PINWHEEL_LIBRARY"):
        os.environ["PINWHEEL_LIBRARY"] = library()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(prog, ["pinwheel"] + args)
