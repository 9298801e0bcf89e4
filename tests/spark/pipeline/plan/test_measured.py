"""The advisor's costs from a root alone (execution records, manifests, journal/profile.json) and
``falkirk pipeline advise ROOT`` (no Spark: the records are written as a durable run writes them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from attrs import evolve

from falkirk.spark import Costs, Eager, Ephemeral, Lazy, NodeCosts, Pipeline, PipelineError
from falkirk.spark.pipeline.plan.measured import (
    PROFILE,
    REPLICATES,
    from_journal,
    root_costs,
    save_profile,
    warm_up,
)
from falkirk.spark.pipeline.store.rootfs import Root


def _measured_root(root: Path, epochs: int = 6, cpu: float | None = None) -> Pipeline:
    """A recorded pipeline whose journal says: p 0.2 s, x 2.0 s (3.0 s with a checkpoint, every=2), y 1.0 s
    (``cpu``: each record also has CPU seconds, ``cpu`` × its wall seconds, as a local master's run records)."""
    pipe = Pipeline(root)
    pipe.input("src", "a BIGINT")
    pipe.step(lambda src, epoch=None: src, name="p", regime=Ephemeral())
    pipe.step(lambda p, *, state, epoch=None: (p, state), name="x", regime=Lazy(every=2))
    pipe.step(lambda x, *, state, epoch=None: (x, state), name="y", regime=Eager())
    pipe.write_root()
    seconds = {"p": lambda e: 0.2, "x": lambda e: 3.0 if e % 2 else 2.0, "y": lambda e: 1.0}
    for step, f in seconds.items():
        for e in range(epochs):
            doc = {"step": step, "epoch": e, "rows": 100, "seconds": f(e), "redo": False, "recovery": None,
                   "jobs": 1, "first_seconds": f(e)}
            if cpu is not None:
                doc["cpu"] = doc["first_cpu"] = cpu * f(e)
            pipe.location.replace(f"journal/{step}/{e:08d}.json", json.dumps(doc).encode())
    return pipe


def test_a_recovery_measures_how_fast_an_epoch_runs_again(tmp_path: Path) -> None:
    """Epochs a recovery redid (their latest record is a redo) price recomputation by the median ratio of every
    step's redone executions to their first ones: one factor for the run, applied to each step's ``compute``."""
    pipe = _measured_root(tmp_path / "root")
    assert from_journal(pipe)["p"].recompute is None  # nothing redone: compute, once completed
    assert from_journal(pipe).complete(["p"])["p"].recompute == pytest.approx(0.2)
    # x redid epochs 2 and 3 at half their first cost, p epoch 3 at 3x its own (one outlier)
    for step, e, seconds, first in (("x", 2, 1.0, 2.0), ("x", 3, 1.5, 3.0), ("p", 3, 0.6, 0.2)):
        doc = {"step": step, "epoch": e, "rows": 100, "seconds": seconds, "redo": True, "recovery": 1, "jobs": 1,
               "first_seconds": first}
        pipe.location.replace(f"journal/{step}/{e:08d}.json", json.dumps(doc).encode())
    costs = from_journal(pipe)
    assert costs["x"].compute == pytest.approx(2.0) and costs["x"].recompute == pytest.approx(1.0)
    assert costs["p"].compute == pytest.approx(0.2) and costs["p"].recompute == pytest.approx(0.1)
    assert costs["y"].recompute == pytest.approx(costs["y"].compute * 0.5)


def test_the_first_epochs_excess_is_a_restarts_cold_start(tmp_path: Path) -> None:
    """A new driver's first epoch costs more than a steady one: ``Costs.restart`` is what its executions cost
    beyond the same steps' steady epochs (a Lazy step's compared with its epochs alike: here without a
    checkpoint), and it survives ``to_json``."""
    pipe = _measured_root(tmp_path / "root")
    assert from_journal(pipe).restart == 0.0  # epoch 0 like the others: no cold start
    for step, seconds in (("p", 1.2), ("x", 2.5), ("y", 1.0)):
        doc = {"step": step, "epoch": 0, "rows": 100, "seconds": seconds, "redo": False, "recovery": None,
               "jobs": 1, "first_seconds": seconds}
        pipe.location.replace(f"journal/{step}/{0:08d}.json", json.dumps(doc).encode())
    costs = from_journal(pipe)
    assert costs.restart == pytest.approx(1.0 + 0.5)
    assert costs["p"].compute == pytest.approx(0.2)  # the cold epoch is still out of the steady figures
    assert Costs.from_json(costs.to_json()).restart == pytest.approx(1.5)


def test_writes_priced_at_zero_are_said_so(tmp_path: Path) -> None:
    """When the one measured checkpoint costs nothing above its epochs without one (noise), every estimated write
    is priced at 0: the costs' source says so, for the advice's readers."""
    pipe = _measured_root(tmp_path / "root")
    assert "priced at 0" not in from_journal(pipe).source
    for e in range(6):
        doc = {"step": "x", "epoch": e, "rows": 100, "seconds": 2.0, "redo": False, "recovery": None, "jobs": 1,
               "first_seconds": 2.0}
        pipe.location.replace(f"journal/x/{e:08d}.json", json.dumps(doc).encode())
    costs = from_journal(pipe)
    assert costs["x"].state_write == 0.0 and costs["y"].state_write == 0.0
    assert "every write is priced at 0" in costs.source


def test_writes_measured_apart_price_the_unmeasured_ones(tmp_path: Path) -> None:
    """Writes measured apart from the steps join the measured checkpoints in the line a + b·bytes: with the one
    checkpoint measured at 0, the Eager step's write (estimated) is no longer free, nor is a log nobody wrote."""
    pipe = _measured_root(tmp_path / "root")
    for e in range(6):  # x's epochs with and without a checkpoint alike: its checkpoint measures 0
        doc = {"step": "x", "epoch": e, "rows": 100, "seconds": 2.0, "redo": False, "recovery": None, "jobs": 1,
               "first_seconds": 2.0}
        pipe.location.replace(f"journal/x/{e:08d}.json", json.dumps(doc).encode())
    calibration = [(1e3, 0.1), (1e3, 0.1), (1e6, 0.4)]
    costs = from_journal(pipe, calibration=calibration)
    assert costs.writes == tuple(calibration) and "3 write(s) measured apart" in costs.source
    assert "priced at 0" not in costs.source
    assert costs["y"].state_write is not None and costs["y"].state_write > 0.05
    full = costs.complete(["p", "x", "y"])
    assert full["p"].log_write is not None and full["p"].log_write > 0.05  # p logs nothing: priced by the line
    assert Costs.from_json(costs.to_json()).writes == tuple(calibration)


def test_a_log_that_is_its_steps_first_job_is_priced_as_a_write_less_a_count(tmp_path: Path) -> None:
    """A step whose output is a frame of its own (its records say ``fresh``) has it computed and counted by one job
    whether it logs or not, and its log's write is that job: with writes less counts measured apart
    (``first_writes``), its log is priced by their line — taken off a logged step's measured median, and added
    for a step that does not log yet — while a step whose output is not fresh (its state, an input passed
    through: a log is then a job of its own) keeps the line of whole writes, as does every checkpoint."""
    pipe = Pipeline(tmp_path / "root")
    pipe.input("src", "a BIGINT")
    pipe.step(lambda src, epoch=None: src, name="b", regime=Ephemeral(log=True))
    pipe.step(lambda b, epoch=None: b, name="p", regime=Ephemeral())
    pipe.step(lambda p, *, state, epoch=None: (p, state), name="x", regime=Eager())
    pipe.step(lambda x, epoch=None: x, name="q", regime=Ephemeral())
    pipe.write_root()
    fresh = {"b": [True] * 5, "p": [True] * 5, "x": [True, True, False, False, False], "q": [None] * 5}
    for step, seconds in (("b", 1.0), ("p", 0.5), ("x", 2.0), ("q", 0.1)):
        for e in range(5):
            doc = {"step": step, "epoch": e, "rows": 100, "seconds": seconds, "redo": False, "recovery": None,
                   "jobs": 1, "first_seconds": seconds, "fresh": fresh[step][e]}
            pipe.location.replace(f"journal/{step}/{e:08d}.json", json.dumps(doc).encode())
    whole = [(1e3, 0.30), (1e6, 0.60)]  # the line through them: slope 0.3 / 999e3, 0.30 - 1e3 · slope at 0
    less = [(1e3, 0.05), (1e6, 0.35)]  # the same writes less a count of the same data: the same slope
    slope = 0.3 / 999e3
    old = from_journal(pipe, calibration=whole)
    new = from_journal(pipe, calibration=whole, first_writes=less)
    assert new.first_use == {"b", "p"}  # x: most records not fresh; q: records that do not say
    assert old["b"].log_write == pytest.approx(0.30 - 1e3 * slope)  # no manifest here: bytes 0
    assert new["b"].log_write == pytest.approx(0.05 - 1e3 * slope)
    assert new["b"].compute == pytest.approx(1.0 - new["b"].log_write)  # the median less the cheaper write
    assert new["b"].compute > old["b"].compute
    assert new["x"].state_write == pytest.approx(old["x"].state_write)  # a checkpoint: a job of its own
    assert new.first_writes == tuple(less) and "write less a count" in new.source
    assert Costs.from_json(new.to_json()) == new
    full = new.complete(["src", "b", "p", "x", "q"])
    line_first, line_whole = full["p"].log_write, full["x"].log_write
    assert line_first is not None and line_whole is not None
    assert line_first == pytest.approx(0.05 - 1e3 * slope + slope * float(full["p"].log_bytes or 0.0))
    assert line_whole - line_first == pytest.approx(0.25, abs=1e-6)  # the job's fixed cost, paid by x alone
    assert full["q"].log_write == pytest.approx(line_whole)
    # without first_writes (an old profile, or the journal alone) every log keeps the line of whole writes
    assert old.complete(["p"])["p"].log_write == pytest.approx(old.complete(["x"])["x"].log_write)


def test_reads_measured_apart_replace_the_estimates(tmp_path: Path) -> None:
    """A restore measured apart is the step's state_read, a replay its log_read (no longer marked estimated); a
    step with none keeps the estimate, and a read of a step the pipeline does not have is ignored."""
    pipe = _measured_root(tmp_path / "root")
    costs = from_journal(pipe, reads={("x", "checkpoint"): (0.4, 0.1), ("p", "log"): (0.3, 0.05),
                                      ("gone", "log"): (1.0, 1.0)})
    assert costs["x"].state_read == 0.4 and costs["p"].log_read == 0.05
    assert "gone" not in costs.nodes and "2 read(s) measured apart" in costs.source
    full = costs.complete(["p", "x", "y"])
    assert full["x"].state_read == 0.4 and "state_read" not in full["x"].estimated
    assert full["p"].log_read == 0.05 and "log_read" not in full["p"].estimated
    assert "state_read" in full["y"].estimated  # nothing measured for y


def test_costs_from_the_journal(tmp_path: Path) -> None:
    """A Lazy step's checkpoint cost is its epochs with a checkpoint minus those without; an Eager step's write is
    estimated from that and taken off its median (marked estimated)."""
    costs = from_journal(_measured_root(tmp_path / "root"))
    assert costs.unit == "wall" and "15 step execution" in costs.source  # epoch 0 (warm-up) left out
    assert costs["p"].compute == pytest.approx(0.2) and costs["p"].rows == 100
    assert costs["x"].compute == pytest.approx(2.0) and costs["x"].state_write == pytest.approx(1.0)
    assert "state_write" not in costs["x"].estimated
    assert costs["y"].state_write == pytest.approx(1.0) and costs["y"].compute == pytest.approx(0.0)
    assert {"state_write", "compute"} <= costs["y"].estimated


def test_a_database_steps_state_is_inside_its_execution(tmp_path: Path) -> None:
    """An Eager step whose state is its own SQLite database writes it inside its function and restores by one
    transaction: its whole execution is compute (a redo does it all again), its write and restore are priced 0
    (marked estimated), where an Eager DataFrame step's write is taken off its median."""
    pipe = Pipeline(tmp_path / "root")
    pipe.input("src", "a BIGINT")
    pipe.step(lambda src, *, state, epoch=None: (src, state), name="x", regime=Lazy(every=2))

    def sink(x, *, db, epoch=None):
        return None

    pipe.step(sink, inputs=["x"], regime=Eager(database="sink.sqlite", tables={"t": "epoch"}))
    pipe.write_root()
    for step, f in {"x": lambda e: 3.0 if e % 2 else 2.0, "sink": lambda e: 0.7}.items():
        for e in range(6):
            doc = {"step": step, "epoch": e, "rows": 100, "seconds": f(e), "redo": False, "recovery": None,
                   "jobs": 1, "first_seconds": f(e)}
            pipe.location.replace(f"journal/{step}/{e:08d}.json", json.dumps(doc).encode())
    full = from_journal(pipe).complete(["x", "sink"])
    assert full["sink"].compute == pytest.approx(0.7) and full["sink"].recompute == pytest.approx(0.7)
    assert full["sink"].state_write == 0.0 and full["sink"].state_read == 0.0
    assert {"state_write", "state_read"} <= full["sink"].estimated and "compute" not in full["sink"].estimated
    assert full["x"].state_write == pytest.approx(1.0)


def test_the_steady_cost_s_spread_is_its_relative_standard_error(tmp_path: Path) -> None:
    """Costs.spread: each steady epoch's deviations from its steps' medians (a Lazy step's epochs compared with
    their like), their standard deviation over the steady cost (each step's mean epoch), over √epochs; 0 when every epoch is alike."""
    pipe = _measured_root(tmp_path / "root")
    assert from_journal(pipe).spread == 0.0  # x's checkpoint epochs are compared with each other: no noise
    for e, seconds in ((1, 0.3), (2, 0.1)):  # p: 0.2 s but for these two epochs
        doc = {"step": "p", "epoch": e, "rows": 100, "seconds": seconds, "redo": False, "recovery": None,
               "jobs": 1, "first_seconds": seconds}
        pipe.location.replace(f"journal/p/{e:08d}.json", json.dumps(doc).encode())
    # epochs 1-5: deviations 0.1, -0.1, 0, 0, 0 (p's median 0.2; x and y as their like), their standard deviation
    # √(0.02 / 4); the steady cost is the steps' mean epochs: p 0.2, x (3 + 2 + 3 + 2 + 3) / 5 = 2.6, y 1.0
    expected = (0.02 / 4) ** 0.5 / 3.8 / 5 ** 0.5
    assert from_journal(pipe).spread == pytest.approx(expected)


def test_costs_carry_bootstrap_draws_of_their_epochs(tmp_path: Path) -> None:
    """from_journal adds REPLICATES bootstrap draws (the steady epochs drawn with replacement, one draw for every
    step): a step whose epochs alike cost the same has the same figure in (almost) every draw, one whose epochs
    vary has draws that vary; the point estimate is the same figures as without draws; seeded (the same journal, the same
    draws); the draws survive the profile's JSON."""
    pipe = _measured_root(tmp_path / "root", epochs=10)
    for e, seconds in ((2, 0.1), (4, 0.3), (6, 0.5), (8, 0.4)):
        doc = {"step": "p", "epoch": e, "rows": 100, "seconds": seconds, "redo": False, "recovery": None,
               "jobs": 1, "first_seconds": seconds}
        pipe.location.replace(f"journal/p/{e:08d}.json", json.dumps(doc).encode())
    costs = from_journal(pipe)
    assert costs.draws == "bootstrap" and len(costs.replicates) == REPLICATES
    assert from_journal(pipe, replicates=0) == evolve(costs, replicates=(), draws="")
    # x costs 2.0 without a checkpoint, 3.0 with one, every epoch: the same in a draw unless it drew none of one
    assert sum(r["x"].compute == costs["x"].compute == 2.0 for r in costs.replicates) >= 0.9 * REPLICATES
    computes = {r["p"].compute for r in costs.replicates}
    assert len(computes) > 1 and min(computes) <= costs["p"].compute < max(computes)
    assert all(not r.replicates for r in costs.replicates)
    assert from_journal(pipe) == costs
    save_profile(pipe, costs)
    assert root_costs(pipe) == costs


def test_costs_are_cpu_seconds_when_every_record_has_them(tmp_path: Path) -> None:
    """Records with CPU seconds (a local master's run) give costs in CPU seconds; one record without makes the
    whole measurement wall time (one unit for all)."""
    pipe = _measured_root(tmp_path / "root", cpu=1.5)
    costs = from_journal(pipe)
    assert costs.unit == "cpu" and "CPU" in costs.source
    assert costs["p"].compute == pytest.approx(0.3) and costs["x"].state_write == pytest.approx(1.5)
    doc = json.loads(pipe.location.read_bytes("journal/p/00000003.json"))
    del doc["first_cpu"]
    pipe.location.replace("journal/p/00000003.json", json.dumps(doc).encode())
    costs = from_journal(pipe)
    assert costs.unit == "wall" and costs["p"].compute == pytest.approx(0.2)


def test_the_jit_is_left_out_but_of_a_new_drivers_cold_start(tmp_path: Path) -> None:
    """Records with the JVM's JIT compilers' share (``first_jit``, ``jit``): the steady figures and a recovery's
    ratio leave it out; the warm-up epochs' excess over the steady epochs (``restart``) counts all their CPU."""
    pipe = _measured_root(tmp_path / "root", cpu=1.0)
    before = from_journal(pipe)
    jit = {0: 2.0, 1: 0.5, 2: 0.4, 3: 0.3, 4: 0.2, 5: 0.1}  # decaying, as a young JVM's does
    for step in ("p", "x", "y"):
        for e, j in jit.items():
            doc = json.loads(pipe.location.read_bytes(f"journal/{step}/{e:08d}.json"))
            doc["cpu"] = doc["first_cpu"] = doc["first_cpu"] + j
            doc["jit"] = doc["first_jit"] = j
            pipe.location.replace(f"journal/{step}/{e:08d}.json", json.dumps(doc).encode())
    costs = from_journal(pipe)
    for step in ("p", "y"):
        assert costs[step].compute == pytest.approx(before[step].compute)  # the JIT's CPU is not the step's
    assert costs["x"].state_write == pytest.approx(before["x"].state_write)
    assert "JIT" in costs.source
    # the warm-up: epoch 0, and epoch 1 whose JIT (0.5) is still above twice its rate in epochs 3-5 (0.2), in
    # all their CPU against the steady epochs less JIT: epoch 0, (0.2 + 2) + (2 + 2) + (1 + 2) against 0.2, 2.0
    # (x's epochs without a checkpoint) and 1.0; epoch 1, its JIT alone, 3 x 0.5 (x's against its checkpoints)
    assert costs.restart == pytest.approx(2.0 + 2.0 + 2.0 + 3 * 0.5)
    doc = json.loads(pipe.location.read_bytes("journal/y/00000003.json"))  # a redo at 0.5 + 0.2 of JIT
    doc.update(redo=True, recovery=1, cpu=0.7, jit=0.2)
    pipe.location.replace("journal/y/00000003.json", json.dumps(doc).encode())
    again = from_journal(pipe)
    assert again["y"].recompute == pytest.approx(again["y"].compute * 0.5 / 1.0)  # less JIT over less JIT


def test_a_warm_up_of_several_epochs_is_all_a_restarts_cold_start(tmp_path: Path) -> None:
    """A JVM that compiles for several epochs (the first checkpoint's code too, as at 10^7 keys) runs them slower,
    JIT and interpreted code together: every epoch while the JIT stays above twice its later rate is out of the
    steady figures and in ``Costs.restart``, all its CPU beyond the steady epochs alike."""
    pipe = _measured_root(tmp_path / "root", epochs=10, cpu=1.0)
    before = from_journal(pipe)
    slower = {0: 1.5, 1: 1.8, 2: 1.6}  # the warm-up's executions less JIT, x steady CPU
    jit = {0: 3.0, 1: 2.0, 2: 1.5, 3: 0.2, 4: 0.1, 5: 0.2, 6: 0.1, 7: 0.2, 8: 0.1, 9: 0.2}
    extra = 0.0
    for e, j in jit.items():
        doc = json.loads(pipe.location.read_bytes(f"journal/x/{e:08d}.json"))
        base = doc["first_cpu"]
        doc["cpu"] = doc["first_cpu"] = base * slower.get(e, 1.0) + j
        doc["jit"] = doc["first_jit"] = j
        pipe.location.replace(f"journal/x/{e:08d}.json", json.dumps(doc).encode())
        if e in slower:
            extra += doc["first_cpu"] - base
    costs = from_journal(pipe)
    assert warm_up(jit) == [0, 1, 2]
    # x's steady figures from epochs 3-9 alone: the slow warm-up epochs do not raise them
    assert costs["x"].compute == pytest.approx(before["x"].compute)
    assert costs["x"].state_write == pytest.approx(before["x"].state_write)
    assert costs.restart == pytest.approx(before.restart + extra)
    assert costs.restart_parts == {"cold": pytest.approx(costs.restart)}


def test_a_local_run_records_cpu_seconds_per_execution(tmp_path: Path, spark: Any) -> None:
    """On a local master each execution record carries the process tree's CPU seconds, and the costs use them;
    an in-driver recovery records its CPU from the failure until every step was back."""
    from falkirk.spark.pipeline.run.cpu import tree_cpu

    if tree_cpu() is None:
        pytest.skip("this kernel's /proc has no task/*/children files: CPU per step is not measured here")
    pipe = Pipeline(tmp_path / "root", spark)
    pipe.input("src", "a BIGINT", source=lambda e: [{"a": i} for i in range(50)])

    @pipe.step(regime=Lazy(every=2))
    def total(src: Any, *, state: Any) -> Any:
        new = src.groupBy().count()
        return new, new

    result = pipe.run(4, fail="total@2:after")  # an in-driver recovery: its CPU is measured too
    cpus = [x.cpu for x in result.journal.executions]
    assert cpus and all(c is not None and c >= 0 for c in cpus) and sum(cpus) > 0  # type: ignore[operator]
    (rec,) = result.journal.recoveries
    assert rec.cpu_seconds is not None and rec.cpu_seconds >= 0  # /proc counts in clock ticks (10 ms): may be 0
    doc = json.loads(pipe.location.read_bytes("journal/total/00000001.json"))  # not redone
    assert doc["first_cpu"] == pytest.approx(doc["cpu"]) and doc["first_cpu"] is not None
    assert doc["first_jit"] is not None and 0 <= doc["first_jit"] <= doc["first_cpu"]  # the JVM's JIT, apart
    assert rec.jit_seconds is not None and 0 <= rec.jit_seconds <= rec.cpu_seconds
    assert from_journal(pipe).unit == "cpu"


def test_profile_measures_writes_apart_and_cleans_up(tmp_path: Path, spark: Any) -> None:
    """Pipeline.profile writes each step's latest checkpoint and log again, measured, into the costs it keeps;
    nothing of those writes stays under the root."""
    from spark_support import all_regimes

    pipe = all_regimes(tmp_path / "root", spark)
    costs = pipe.profile(epochs=4)
    assert len(costs.writes) >= 2  # rolling's checkpoint, hourly's log (at least)
    assert all(b > 0 and c >= 0 for b, c in costs.writes) and max(c for _, c in costs.writes) > 0
    # each item written at its own size, then at SCALE times its rows: more bytes (the line's slope)
    assert len(costs.writes) % 2 == 0
    assert all(big > small for (small, _), (big, _) in zip(costs.writes[::2], costs.writes[1::2], strict=True))
    assert len(costs.first_writes) == len(costs.writes)
    assert root_costs(pipe).first_writes == costs.first_writes
    # the steps whose output was a frame of their own, computed by their own first job, as the run recorded: none
    # here — not rolling (its output is its state), report (rolling's output passed through), alerts (a database
    # step); nor clean and hourly: unlogged, the job of their first consumer computes them (clean) or would
    # (hourly), with no job of their own
    assert costs.first_use == set()
    fresh = {s: {json.loads(pipe.location.read_bytes(f"journal/{s}/{f}")).get("fresh")
                 for f in pipe.location.listdir(f"journal/{s}") if f[:-5].isdigit()} for s in ("clean", "hourly")}
    assert fresh == {"clean": {False}, "hourly": {False}}, fresh
    assert not pipe.location.exists("journal/calibration")
    assert root_costs(pipe).writes == costs.writes  # kept in journal/profile.json
    # and read back: rolling's restore and hourly's replay measured, no longer estimated; alerts (its SQLite
    # database) restores by a transaction, priced 0
    assert "read(s) measured apart" in costs.source
    assert costs["rolling"].state_read is not None and costs["rolling"].state_read > 0
    assert costs["hourly"].log_read is not None and costs["hourly"].log_read >= 0
    assert "state_read" not in costs["rolling"].estimated and "log_read" not in costs["hourly"].estimated
    assert costs["alerts"].state_read == 0.0 and costs["alerts"].state_write == 0.0
    assert root_costs(pipe)["rolling"].state_read == costs["rolling"].state_read
    # a restart measured too: the pipeline started again on its root, what it spent outside step executions
    assert set(costs.restart_parts) == {"cold", "rebuild"} and costs.restart_parts["rebuild"] > 0
    assert costs.restart == pytest.approx(sum(costs.restart_parts.values()))
    assert costs.draws == "bootstrap" and all(r.restart_parts["rebuild"] == costs.restart_parts["rebuild"]
                                              for r in costs.replicates)
    assert pipe.predict("driver").restart == pytest.approx(costs.restart)


def test_a_drivers_session_start_is_measured_in_a_process_of_its_own() -> None:
    """session_start: Python's imports, the JVM and a local session (no job: the profile's ``cold`` part prices the
    first jobs), in a process of its own (CPU of its process tree where /proc says, and wall seconds)."""
    from falkirk.spark.pipeline.run.calibrate import session_start
    from falkirk.spark.pipeline.run.cpu import tree_cpu

    got = session_start("local[1]")
    assert got["wall"] is not None and got["wall"] > 0
    if tree_cpu() is not None:
        assert got["cpu"] is not None and got["cpu"] > 0 and got["jit"] is not None and 0 <= got["jit"] <= got["cpu"]


def test_profile_json_is_preferred_and_round_trips(tmp_path: Path) -> None:
    """save_profile keeps costs under the root; root_costs reads them back as they were."""
    pipe = _measured_root(tmp_path / "root")
    mine = Costs({"p": NodeCosts(compute=1.0), "x": NodeCosts(compute=2.0, state_write=0.5)}, unit="cpu",
                 source="by hand")
    save_profile(pipe, mine)
    assert (tmp_path / "root" / PROFILE).exists()
    assert root_costs(pipe) == mine


def test_no_measurements_is_an_error_saying_what_to_do(tmp_path: Path) -> None:
    """A root without execution records names the missing journal and the way to measure."""
    pipe = Pipeline(tmp_path / "empty")
    pipe.input("src", "a BIGINT")
    pipe.step(lambda src, epoch=None: src, name="p", regime=Ephemeral())
    with pytest.raises(PipelineError, match="no measurements.*profile"):
        from_journal(pipe)


def test_cli_advise_from_the_root_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """falkirk pipeline advise ROOT prints the table, or the falkirk-advice/1 document, and draws."""
    from falkirk.cli import main

    root = tmp_path / "root"
    _measured_root(root)
    assert main(["pipeline", "advise", str(root), "--failure-rate", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "advice for failure rate 0.05/epoch" in out and "current:" in out and "advised:" in out
    assert main(["pipeline", "advise", str(root), "--failure-rate", "0.05", "--failures", "driver",
                 "--failures", "x+y", "--json", "--accepted-only"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert doc["format"] == "falkirk-advice/1" and doc["failures"] == ["driver", "x+y"] and doc["unit"] == "wall"
    assert not any(s["refused"] for s in doc["steps"])
    pytest.importorskip("matplotlib")
    png = tmp_path / "advice.png"
    assert main(["pipeline", "advise", str(root), "--failure-rate", "0.05", "--draw", str(png)]) == 0
    assert png.stat().st_size > 0


def test_cli_advise_prices_with_given_profiles_pooled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--costs FILE prices with that falkirk-costs/1 document instead of the root's; given several times, with
    their median (Costs.median); a file that is not such a document is an error naming it."""
    from falkirk.cli import main

    root = tmp_path / "root"
    measured = from_journal(_measured_root(root))
    files = []
    for i, factor in enumerate((1.0, 3.0, 2.0)):  # three "processes": x's compute 2.0, 6.0, 4.0 -> median 4.0
        nodes = {n: evolve(c, compute=c.compute * factor) for n, c in measured.nodes.items()}
        files.append(tmp_path / f"profile-{i}.json")
        files[-1].write_text(json.dumps(evolve(measured, nodes=nodes).to_json()))

    def advised(*args: str) -> dict[str, Any]:
        assert main(["pipeline", "advise", str(root), "--failure-rate", "0.05", "--json", *args]) == 0
        return dict(json.loads(capsys.readouterr().out))

    def steady(doc: dict[str, Any]) -> float:
        return float(doc["current"]["steady"])

    alone, one, pooled = advised(), advised("--costs", str(files[1])), advised(
        *[a for f in files for a in ("--costs", str(f))])
    assert steady(one) > steady(pooled) > steady(alone)
    assert steady(pooled) == pytest.approx(steady(advised("--costs", str(files[2]))))  # the median profile's
    uri = "memory://falkirk-test-costs/profile.json"  # read as a root is (fsspec), not as a local file
    Root("memory://falkirk-test-costs").replace("profile.json", files[2].read_bytes())
    assert steady(advised("--costs", uri)) == pytest.approx(steady(pooled))
    (tmp_path / "bad.json").write_text('{"format": "something-else"}')
    assert main(["pipeline", "advise", str(root), "--failure-rate", "0.05", "--costs", str(tmp_path / "bad.json")]) != 0
    assert "bad.json" in capsys.readouterr().err
    assert main(["pipeline", "advise", str(root), "--failure-rate", "0.05", "--costs", str(tmp_path / "none.json")]) != 0
    assert "none.json" in capsys.readouterr().err


def test_pipe_advise_reads_the_root(tmp_path: Path) -> None:
    """Pipeline.advise without costs prices with the root's measurements; refused changes say why."""
    pipe = Pipeline.from_root(_measured_root(tmp_path / "root").root)
    advice = pipe.advise(0.05, failures=["each-step", "driver"])
    assert advice.unit == "wall" and advice.advised.total <= advice.current.total
    for name, why in advice.refused.items():
        assert name in pipe.steps and "log False → True" in why or "regime was" in why


def test_the_read_job_hashes_many_rows_without_overflow(spark: Any) -> None:
    """The calibration's read job folds every row's 64-bit hash: a sum would overflow under ANSI mode (it did in
    the W4 benchmark); 5,000 rows of hashes must not."""
    from falkirk.spark.pipeline.run.calibrate import _hashed

    with_ansi = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        _hashed(spark.range(5000).selectExpr("id", "id * 7 AS v"))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", with_ansi)
