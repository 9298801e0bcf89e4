"""Rescaling on recovery from Flink unaligned checkpoints (seed 001), as a focused model.

The simulator of :mod:`falkirk.sim` has one instance per processor; Flink
rescales *operators with parallel subtasks*. This package models exactly
that part of FLIP-76:

* :mod:`~falkirk.sim.rescale.keygroups` — key groups (max parallelism),
  ``key → key group`` by hash, contiguous key-group ranges per subtask;
* :mod:`~falkirk.sim.rescale.job` — the job: a keyed source, an optional
  forward source, and one task with a hash input and a forward input (the
  FLINK-38267 shape), with a parallelism-independent expected output;
* :mod:`~falkirk.sim.rescale.run` — subtasks, channels with sequence numbers,
  unaligned checkpoint barriers, whole-job failures that restart at another
  parallelism, and the oracle :func:`check_rescale` (output equals the
  failure-free run's: per key and per split, the same values in the same order);
* :mod:`~falkirk.sim.rescale.restore` — the checkpoint cut chosen by
  falkirk's solver over ``sequence``-domain frontiers (in-flight data =
  logged channel records between the sender's and the receiver's snapshot),
  and the redistribution strategies: the correct one (by key group, filtered
  after deserialisation, restored data first; forward in-flight data refused
  with :class:`RescaleError` naming the edge, or moved with its split) and
  the naive ones that lose, duplicate or reorder records.

>>> from falkirk.sim.rescale import Job, Rescale, check_rescale, run_job, expected_output
>>> job = Job(keyed=[[(k % 4, k) for k in range(10)], [(k % 3, k) for k in range(8)]])
>>> check_rescale(job, 3, [Rescale(12, 1)], seed=1).ok           # scale down 3 -> 1
True
>>> run_job(job, 1, [Rescale(9, 4)], seed=2).output == expected_output(job)   # scale up 1 -> 4
True
"""

from falkirk.sim.rescale.job import FORWARD_MODES, Job, Output, Rescale, expected_output
from falkirk.sim.rescale.keygroups import key_group, key_group_range, operator_index, owner
from falkirk.sim.rescale.restore import STRATEGIES, RescaleError, choose_cut, redistribute
from falkirk.sim.rescale.run import JobRun, Outcome, RescaleVerdict, RestoreInfo, check_rescale, run_job

__all__ = [
    "FORWARD_MODES",
    "STRATEGIES",
    "Job",
    "Output",
    "Rescale",
    "RescaleError",
    "JobRun",
    "Outcome",
    "RestoreInfo",
    "RescaleVerdict",
    "check_rescale",
    "run_job",
    "expected_output",
    "key_group",
    "key_group_range",
    "operator_index",
    "owner",
    "choose_cut",
    "redistribute",
]
