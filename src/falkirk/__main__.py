"""``python -m falkirk``: the ``falkirk`` command line (see :mod:`falkirk.cli`)."""

import sys

from falkirk.cli import main

if __name__ == "__main__":
    sys.exit(main())
