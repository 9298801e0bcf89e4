"""Scenario files: the language-neutral ``falkirk-scenario/1`` interchange format (SPEC §9).

A scenario is a JSON document describing a dataflow graph, each processor's
checkpoint metadata and which processors failed, so that schedulers in any
language (and the ``falkirk`` command line) can ask for a rollback plan.

* :func:`parse` (a decoded document), :func:`loads` (JSON text) and
  :func:`load` (a file) return a frozen :class:`Scenario` with
  ``.dataflow`` (a :class:`~falkirk.solver.Dataflow`), ``.failed`` (a
  frozenset of names or ``"all"``) and ``.notifications``;
* :func:`dump` writes a scenario back with canonical encodings.

Every problem raises a :class:`~falkirk.errors.ScenarioError` whose ``path``
names the offending field (``processors.sum.checkpoints[0].deliverd``).

>>> from falkirk.scenario import loads, dump
>>> s = loads('''{"format": "falkirk-scenario/1",
...   "processors": {
...     "src":  {"domain": "epoch", "stateless": true},
...     "sum":  {"domain": "epoch", "logs": ["e2"],
...              "checkpoints": [{"frontier": 2, "notifications": 2, "delivered": {"e1": 2}}]},
...     "sink": {"domain": "epoch", "checkpoints": [{"frontier": 1, "delivered": {"e2": 1}}],
...              "live": {"delivered": {"e2": 4}}}},
...   "edges": {"e1": {"src": "src", "dst": "sum", "projection": "identity"},
...             "e2": {"src": "sum", "dst": "sink", "projection": "identity"}},
...   "failed": ["sum"]}''')
>>> s.solve().to_json()["actions"]
{'src': 'rollback', 'sum': 'restore', 'sink': 'rollback'}
>>> parse(dump(s)) == s
True
"""

from falkirk.scenario.model import Scenario
from falkirk.scenario.reader import FORMAT, decode_frontier, load, loads, parse
from falkirk.scenario.writer import dump, dumps

__all__ = ["FORMAT", "Scenario", "decode_frontier", "dump", "dumps", "load", "loads", "parse"]
