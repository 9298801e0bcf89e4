"""Dictionaries made on first read (``falkirk.solver.model.views``) and the dataflow views built on them."""

from __future__ import annotations

import copy
import json
import pickle

import numpy as np

from falkirk.solver import Checkpoint, Dataflow, Edge, Processor, solve_frontiers
from falkirk.solver.model.views import OnDemand


def test_values_are_made_once_on_first_read_and_keys_follow_the_given_order() -> None:
    made: list[str] = []

    def make(k: str) -> str:
        made.append(k)
        return k * 2

    d = OnDemand({"b": 0, "a": 1, "c": 2}, make)
    assert list(d) == ["b", "a", "c"] and len(d) == 3 and made == []
    assert "a" in d and "z" not in d and d.get("z") is None and made == []
    assert d["a"] == "aa" and d["a"] == "aa" and made == ["a"]
    assert list(d.items()) == [("b", "bb"), ("a", "aa"), ("c", "cc")] and made == ["a", "b", "c"]
    assert list(d.values()) == ["bb", "aa", "cc"] and list(d.keys()) == ["b", "a", "c"]


def test_a_missing_key_is_a_key_error_and_nothing_is_made() -> None:
    d = OnDemand(["x"], lambda k: 1 / 0)
    try:
        d["y"]
    except KeyError as exc:
        assert exc.args == ("y",)
    else:
        raise AssertionError("no KeyError")


def test_it_equals_copies_pickles_and_prints_as_the_whole_dict() -> None:
    d = OnDemand(lambda: {"a": None, "b": None}, str.upper)
    whole = {"a": "A", "b": "B"}
    assert d == whole and whole == d and not (d != whole) and d != {"a": "A"}
    assert dict(d) == whole and {**d} == whole and d.copy() == whole
    assert pickle.loads(pickle.dumps(d)) == whole and copy.deepcopy(d) == whole
    assert repr(d) == repr(whole) and json.loads(json.dumps(dict(d))) == whole


def test_an_array_dataflow_makes_no_processor_or_edge_until_one_is_read() -> None:
    df = Dataflow.from_arrays(
        ["a", "b", "c"], np.array([0, 1]), np.array([1, 2]), logged=np.array([True, False]),
        ck_ptr=np.array([0, 1, 2, 2]), ck_val=np.array([3, 1]),
    )
    plan = solve_frontiers(df, ["a"], strategy="vectorised")
    objects = Dataflow(
        [Processor("a", "epoch", logs=["e0"], checkpoints=[Checkpoint(3)]),
         Processor("b", "epoch", checkpoints=[Checkpoint(1)]), Processor("c", "epoch")],
        [Edge("e0", "a", "b"), Edge("e1", "b", "c")],
    )
    assert plan.to_json() == solve_frontiers(objects, ["a"], strategy="worklist").to_json()
    assert dict.__len__(df.processors) == 0 and dict.__len__(df.edges) == 0 and dict.__len__(df.bound) == 0
    assert df.processors["a"].logs == frozenset({"e0"}) and dict.__len__(df.processors) == 1
    assert df.edges["e1"] == Edge("e1", "b", "c") and df.inputs["c"] == ["e1"] and df.outputs["a"] == ["e0"]


def test_the_object_constructors_bind_projections_when_first_read() -> None:
    procs = [Processor(f"p{i}", "epoch", checkpoints=[Checkpoint(1)]) for i in range(4)]
    df = Dataflow(procs, [Edge(f"e{i}", f"p{i}", f"p{i + 1}") for i in range(3)])
    assert dict.__len__(df.bound) == 0
    assert df.bound["e1"].spec.name == "identity" and dict.__len__(df.bound) == 1
    assert [b.edge for b in df.bound.values()] == ["e0", "e1", "e2"]
