"""``python -m benchmarks.spark_matrix``: the workload matrix (``--help`` lists the options)."""

import signal
import sys

from .cli import main

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
