"""Notes on a pipeline's shape (``pipe.check()``): each a string with the regimes that act on it, accepted in one
call (``pipe.apply(pipe.check())``); a domino through a shared unlogged step is named (no Spark)."""

from __future__ import annotations

import itertools
import pickle
from typing import Any

import pytest

from falkirk.spark import Eager, Ephemeral, Lazy, Pipeline, PipelineError
from falkirk.spark.pipeline.plan.shape import Note, fanout_notes, fixes, output_notes

_ROOTS = itertools.count()


def _fanout(every_a: int, every_b: int) -> Pipeline:
    """``src → parse`` (unlogged) feeding two stateful branches ``a`` and ``b`` checkpointing every ``every_a`` and
    ``every_b`` epochs, ``a`` feeding an output."""
    pipe = Pipeline(f"memory://falkirk-test/shape-{next(_ROOTS)}")
    pipe.input("src", "a BIGINT")
    ns: dict[str, Any] = {}
    exec("def parse(src, epoch=None): return src\n"  # noqa: S102
         "def a(parse, *, state, epoch=None): return parse, state\n"
         "def b(parse, *, state, epoch=None): return parse, state\n", ns)
    pipe.step(ns["parse"], regime=Ephemeral())
    pipe.step(ns["a"], regime=Lazy(every=every_a))
    pipe.step(ns["b"], regime=Lazy(every=every_b))
    pipe.output("report", inputs=["a"])
    return pipe


def test_a_fanout_note_carries_its_fix_and_one_call_accepts_it() -> None:
    """The shared unlogged step's note is a str whose fix is log=True on it; pipe.apply(pipe.check()) applies every
    note's fix (an output note has none) and the notes go away."""
    pipe = _fanout(3, 3)
    notes = pipe.check()
    assert [n.kind for n in notes] == ["fanout", "output"]
    fan, out = notes
    assert isinstance(fan, str) and fan.startswith("step 'parse' is not logged and feeds a, b")
    assert fan.fix == {"parse": Ephemeral(log=True)} and out.fix == {}
    assert "pipe.apply(pipe.check()) accepts it" in fan and "domino" not in fan  # same spacings: a drag, no domino
    assert pipe.apply(notes) is pipe
    assert pipe.steps["parse"].regime == Ephemeral(log=True)
    assert [n.kind for n in pipe.check()] == ["output"]
    assert pickle.loads(pickle.dumps(fan)) == fan and pickle.loads(pickle.dumps(fan)).fix == fan.fix


def test_a_domino_to_empty_is_named() -> None:
    """Branches checkpointing every 5 and 7 epochs behind an unlogged step: a failure of one early in the run rolls
    the other back to empty (their first shared checkpoint is epoch 34); the note says so, and its fix stops it."""
    pipe = _fanout(5, 7)
    note = fanout_notes(pipe)[0]
    assert "a domino: a failure of a in epoch 8 rolls b, on another branch, back to empty" in note
    assert note.fix == {"parse": Ephemeral(log=True)}
    pipe.apply(note)
    assert fanout_notes(pipe) == []


def test_fixes_refuse_what_is_not_a_note_and_conflicting_fixes() -> None:
    """A plain string names no fix; two notes fixing one step differently are refused; notes without a fix add
    nothing."""
    pipe = _fanout(2, 3)
    with pytest.raises(PipelineError, match="is not a note of pipe.check"):
        pipe.apply(["log parse"])  # type: ignore[list-item]
    one = Note("x", kind="fanout", fix={"parse": Ephemeral(log=True)})
    other = Note("y", kind="fanout", fix={"parse": Eager()})
    with pytest.raises(PipelineError, match="two notes fix step 'parse' differently"):
        fixes([one, other])
    assert fixes([one, *output_notes(pipe)]) == {"parse": Ephemeral(log=True)}
    assert fixes(one) == {"parse": Ephemeral(log=True)}
