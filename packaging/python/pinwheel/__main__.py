"""python -m pinwheel ARGS: the same as the `pinwheel` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
