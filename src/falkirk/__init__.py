"""falkirk: rollback recovery for dataflow systems (the Falkirk Wheel framework).

Core API: time domains and frontiers (:mod:`falkirk.domains`), the dataflow
model and solver (:mod:`falkirk.solver`). ``import falkirk`` never imports
PySpark or hypothesis; those live behind :mod:`falkirk.spark` and
:mod:`falkirk.testing`.

>>> import falkirk
>>> falkirk.Frontier.top(falkirk.Epoch()).is_top
True
"""

import logging

from falkirk.domains import Epoch, Frontier, Lexicographic, Product, Sequence
from falkirk.errors import FalkirkError

__version__ = "0.1.0"

# Library logging is quiet until the application configures it (falkirk.spark logs each step).
logging.getLogger("falkirk").addHandler(logging.NullHandler())

__all__ = ["Epoch", "Frontier", "Lexicographic", "Product", "Sequence", "FalkirkError", "__version__"]
