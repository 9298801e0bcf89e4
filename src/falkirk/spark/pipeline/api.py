"""The :class:`Pipeline` a user holds: a definition that can run itself and plan what-if failures.

This is the one module that joins the rooms: the definition
(:mod:`~falkirk.spark.pipeline.declare`), the run
(:mod:`~falkirk.spark.pipeline.run`) and the plans
(:mod:`~falkirk.spark.pipeline.plan`). Nothing below it imports it, so the
definition never imports the executor to run itself and the what-if never
imports the executor to see a live run: this class hands each of them what
it needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Self

from falkirk.spark.errors import PipelineError, RunInterrupted
from falkirk.spark.pipeline.declare.definition import Definition
from falkirk.spark.pipeline.plan.advice import Advice
from falkirk.spark.pipeline.plan.advising import advise, refusals
from falkirk.spark.pipeline.plan.costs import Costs
from falkirk.spark.pipeline.plan.feasible import verify_root
from falkirk.spark.pipeline.plan.measured import from_journal, root_costs, save_profile, with_restart
from falkirk.spark.pipeline.plan.prediction import Prediction, predict
from falkirk.spark.pipeline.plan.shape import Note, fanout_notes, fixes, output_notes
from falkirk.spark.pipeline.plan.whatif import WhatIf, check_steps, from_root
from falkirk.spark.pipeline.run.executor import Executor, RunResult
from falkirk.spark.pipeline.run.interrupt import Interrupt, after_interrupt, interruptible
from falkirk.spark.pipeline.run.progress import Progress
from falkirk.spark.pipeline.run.session import check_usable, local_session, sql_conf
from falkirk.spark.pipeline.store.storage import Storage

__all__ = ["Pipeline"]


class Pipeline(Definition):
    """A multi-regime PySpark pipeline rooted at ``root``: declare it, :meth:`run` it, ask
    :meth:`plan_failure`.

    Declaring (``input``, ``step``, ``output``) and the constructor's
    arguments (``spark``, ``fsync``, ``checksums``, ``gc``, ``monitor``,
    ``durable``, ``spark_conf``, ``retain``, ``code_changes``) are those of
    :class:`~falkirk.spark.pipeline.declare.definition.Definition`.
    """

    _executor: Executor | None = None  # the running executor, during run()

    def run(
        self,
        epochs: int,
        *,
        fail: Any = (),
        progress: Callable[[str], None] | None = None,
        bar: bool = False,
    ) -> RunResult:
        """Run (or resume) the pipeline until every step has completed epochs ``0..epochs-1``.

        State already persisted under the root is recovered first, as after
        a driver crash. ``fail`` injects failures (``"cc@7:mid"`` strings or
        :class:`~falkirk.spark.pipeline.run.failures.Injection` objects); ``progress``
        receives a line per epoch, per redone step and per recovery event;
        ``bar=True`` draws a live progress bar (tqdm) of the step executions
        left. Each step's start and finish (rows, seconds) is also logged to
        the ``falkirk.spark`` logger (:mod:`~falkirk.spark.pipeline.run.progress`).
        Ctrl-C stops the run with :class:`~falkirk.spark.errors.RunInterrupted`
        (a ``KeyboardInterrupt``) after one line saying where; the root stays
        consistent and the same call resumes.
        """
        if self.spark is None:
            self.spark = local_session()
        check_usable(self.spark, f"pipeline at {self.location.uri}")
        with sql_conf(self.spark, self.spark_conf), interruptible(self.spark):
            ex: Executor | None = None
            interrupted: RunInterrupted | None = None
            try:
                ex = self._executor = Executor(self, fail=fail, progress=progress, bar=bar)
                return ex.run(epochs)
            except (KeyboardInterrupt, Interrupt):
                # the jobs of the executions in flight (a sequential run's last one has just let go of its
                # group)
                groups: list[str | None] = [None]
                if ex is not None:
                    groups = [*sorted(ex.state.groups | ({ex.state.group} if ex.state.group else set()))]
                for group in groups:
                    after_interrupt(self.spark, group)
                where = (
                    f" during {ex.state.running}"
                    if ex is not None and ex.state.running
                    else " while starting"
                )
                message = (
                    f"run interrupted (Ctrl-C){where}; the root {self.location.uri} is consistent (what "
                    "completed is durable, what was in flight is redone): the same call resumes"
                )
                (ex.progress.line if ex is not None else Progress().line)(message, level=logging.WARNING)
                interrupted = RunInterrupted(message, self.location.uri)
            finally:
                if ex is not None:
                    ex.asks.close()  # what other threads asked meanwhile is answered
                self._executor = None
                try:
                    if ex is not None:
                        ex.close()
                except Exception:  # noqa: BLE001 - after an interrupt the session may refuse: the root is what counts
                    if interrupted is None:
                        raise
            raise interrupted from None

    def plan_failure(self, steps: Iterable[str] | str, *, at: int | None = None) -> WhatIf:
        """The rollback plan falkirk would execute if ``steps`` failed now — nothing is run or changed.

        During a run (e.g. from the ``progress`` callback) the plan comes
        from the running executor's state — asked from another thread, it is
        made on the run's thread at its next safe point (after the execution
        in flight, in a sequential run) and this call waits for it
        (:mod:`~falkirk.spark.pipeline.run.asks`); otherwise from the manifests under
        the root alone (no Spark), as for a driver that resumed and caught up
        to the last epoch every step completed, or to epoch ``at``. The
        :class:`~falkirk.spark.pipeline.plan.whatif.WhatIf` has each step's
        frontier, action and the constraint behind it (``table()``), the
        epochs recomputed, the logs replayed, and ``draw(path)``.
        """
        names = check_steps(self, steps)
        ex = self._executor
        if ex is not None and at is None:
            # the run's state is its thread's: another thread's question waits for a safe point there
            plan = ex.asks.call(lambda: ex.state.what_if(names, ex.storage))
            if plan is not None:
                return plan
        return from_root(self, names, at=at)

    def check(self) -> list[Note]:
        """Notes on the pipeline's shape before it runs.

        Each unlogged step that feeds two or more consumers and whose
        ``log=True`` would make recoveries smaller
        (:func:`~falkirk.spark.pipeline.plan.shape.fanout_notes`, also the
        first notes of every run), and each output whose committed epochs a
        sparsely checkpointed step upstream may compute again — what keeping
        that output final asks of those steps
        (:func:`~falkirk.spark.pipeline.plan.shape.output_notes`). Each is a
        :class:`~falkirk.spark.pipeline.plan.shape.Note` (a ``str``) whose
        ``fix`` holds the regimes that act on it: ``pipe.apply(pipe.check())``
        accepts them all.
        """
        return fanout_notes(self) + output_notes(self)

    def verify(self) -> list[str]:
        """Every item under the root checked against its manifest, and the input log: the problems found.

        Nothing is run or changed (no Spark). Each problem names the file
        and what is wrong with it (:func:`~falkirk.spark.pipeline.plan.feasible.verify_root`).
        """
        _, problems = verify_root(self, Storage(self.location, fsync=False, checksums=self.checksums))
        return [str(p) for p in problems]

    def advise(
        self,
        failure_rate: float,
        *,
        failures: str | Sequence[Any] = "each-step",
        storage_budget: float | None = None,
        objective: str = "cpu",
        costs: Costs | None = None,
        accepted_only: bool = False,
        min_saving: float | None = None,
        allow_domino: bool = False,
    ) -> Advice:
        """Each step's regime chosen from measured costs and the rollback closure (``docs/advisor.md``).

        ``failure_rate``: expected failures per epoch, each of one of the
        kinds ``failures`` names (``"each-step"``: each step alone;
        ``"driver"``: every node; or a list of step names, ``"driver"`` and
        tuples of steps failing together); ``storage_budget``: at most this
        many bytes persisted per epoch; ``costs``: the figures to price with
        (default: ``ROOT/journal/profile.json``, else the journal of the runs
        under the root); ``accepted_only``: only changes a restart on the
        existing root accepts; ``min_saving``: keep the current regimes unless
        the advised ones save at least this fraction (default: the relative
        standard error of the measured steady cost, ``Costs.spread``);
        ``allow_domino``: consider regimes under which a failure in one branch
        rolls another back past its checkpoints (by default the advice stops
        that). Nothing is run or changed.
        """
        return advise(
            self,
            root_costs(self) if costs is None else costs,
            failure_rate,
            failures=failures,
            storage_budget=storage_budget,
            objective=objective,
            accepted_only=accepted_only,
            min_saving=min_saving,
            allow_domino=allow_domino,
        )

    def predict(
        self,
        failure: str | Sequence[str],
        *,
        regimes: Mapping[str, Any] | None = None,
        at: Any = None,
        costs: Costs | None = None,
    ) -> Prediction:
        """What one failure of ``failure`` (a step, ``"driver"``, or steps failing together) costs under this
        pipeline's regimes changed by ``regimes``, with its standard error, as the advisor prices it
        (:func:`~falkirk.spark.pipeline.plan.prediction.predict`: ``at`` — ``None`` the mean over the moments it
        can strike at, ``e`` after epoch ``e``, ``(e, step)`` while ``step`` runs ``e + 1``); ``costs`` as for
        :meth:`advise`. Nothing is run or changed.
        """
        return predict(self, root_costs(self) if costs is None else costs, failure, regimes=regimes, at=at)

    def apply(self, advice: Advice | Mapping[str, Any] | Note | Iterable[Note]) -> Self:
        """Run with the advised regimes from now on (``advice``: an :class:`Advice`, ``{step: regime}``, or a
        :class:`~falkirk.spark.pipeline.plan.shape.Note` or notes of :meth:`check`, whose fixes are applied).

        The same rules as any regime change on an existing root hold
        (:mod:`~falkirk.spark.pipeline.declare.evolution`): a change a restart
        would refuse raises :class:`PipelineError` naming each step and why,
        and nothing changes. Returns the pipeline.
        """
        if isinstance(advice, Advice):
            regimes = advice.regimes()
        elif isinstance(advice, Mapping):
            regimes = dict(advice)
        else:
            regimes = fixes(advice)
        changed = self.with_regimes(regimes)
        refused = refusals(self, regimes)
        if refused:
            raise PipelineError(
                "apply: the root would refuse "
                + "; ".join(f"step {n!r}: {why}" for n, why in refused.items())
                + " (advise(..., accepted_only=True) advises "
                "only accepted changes; a new root accepts any)"
            )
        self.steps, self.regimes = changed.steps, changed.regimes
        return self

    def profile(
        self, epochs: int = 3, *, fail: Any = (), restart: bool = True, session: bool = False
    ) -> Costs:
        """Run ``epochs`` epochs (durably, under this pipeline's root: use a scratch root to keep a real one
        clean), measure each step's costs from the journal and keep them in ``ROOT/journal/profile.json``.

        ``fail`` injects failures as :meth:`run` does: their recoveries measure how much faster (or slower) an
        epoch runs again than the first time (``NodeCosts.recompute``). ``restart``: then start the pipeline
        again on its root, as a restarted driver does, and measure what that costs outside step executions
        (``Costs.restart_parts["rebuild"]``); ``session``: also measure a driver's, JVM's and SparkSession's
        start in a process of its own (``["session"]``; a local master only). Afterwards every step's latest
        checkpoint and log is written again apart from the steps, and those writes are measured
        (:mod:`~falkirk.spark.pipeline.run.calibrate`): they price the writes the run did not measure; and
        read back as a recovery reads them, which prices each such step's restore and replay. The costs carry
        bootstrap draws of the run's epochs (``Costs.replicates``): every prediction's error."""
        from falkirk.spark.pipeline.run.calibrate import calibrate, restart_cost, session_start
        from falkirk.spark.pipeline.run.probe import is_local_master

        if not self.durable:
            raise PipelineError(
                "profile: the pipeline is not durable (durable=False): nothing would be measured"
            )
        self.run(epochs, fail=fail)
        assert self.spark is not None  # run() made one
        again = restart_cost(lambda: self.run(epochs), self.spark) if restart else None
        started = (
            session_start(str(self.spark.conf.get("spark.master")))
            if session and is_local_master(self.spark)
            else None
        )
        with sql_conf(self.spark, self.spark_conf):
            measured = calibrate(self, self.spark)
        costs = from_journal(
            self, calibration=measured.writes, reads=measured.reads, first_writes=measured.first_writes
        )
        cpu = costs.unit == "cpu"
        costs = with_restart(
            costs,
            rebuild=None if again is None else again.cpu if cpu else again.wall,
            session=None if started is None else (started["cpu"] if cpu else started["wall"]),
        )
        save_profile(self, costs)
        return costs
