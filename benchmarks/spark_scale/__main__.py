"""``python -m benchmarks.spark_scale``: falkirk.spark against Structured Streaming across sizes (``--help``)."""

import signal
import sys

from .cli import main

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
