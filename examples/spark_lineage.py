"""A Spark job's lineage as a falkirk dataflow, and what must re-run when shuffle files are lost.

Builds an unrolled PageRank (a links shuffle reused by three iterations), shows
the processors falkirk sees *before* the job runs, runs it while recording the
stages Spark submits, deletes the shuffle files the result stage reads, asks
falkirk what must re-run and checks the answer against the stages Spark
resubmits.

Run it with ``.venv/bin/python examples/spark_lineage.py`` (needs the ``spark``
extra and Java 17+; about 30 s, most of it starting Spark).
"""

from __future__ import annotations

from operator import add
from typing import Any


def pagerank(sc: Any, iterations: int = 3) -> Any:
    """Ranks of a 6-node graph after ``iterations`` unrolled iterations."""
    edges = sc.parallelize([(i % 6, (i * 5 + 1) % 6) for i in range(24)], 2)
    links = edges.groupByKey().mapValues(lambda vs: sorted(set(vs)))
    ranks = links.map(lambda kv: (kv[0], 1.0))
    for _ in range(iterations):
        contribs = links.join(ranks).flatMap(lambda kv: [(d, kv[1][1] / len(kv[1][0])) for d in kv[1][0]])
        ranks = contribs.reduceByKey(add).mapValues(lambda r: round(0.15 + 0.85 * r, 9))
    return ranks


def main(spark: Any = None) -> dict[str, Any]:
    """Run the demonstration; return what falkirk predicted and what Spark did."""
    from falkirk.spark.lineage.graph import lineage
    from falkirk.spark.lineage.listener import JobRecorder
    from falkirk.spark.lineage.rerun import lose_outputs, what_must_rerun

    if spark is None:
        from falkirk.spark import local_session

        spark = local_session()
    ranks = pagerank(spark.sparkContext)

    lin = lineage(ranks)  # no job has run yet
    print("processors (inputs first), before the first run:")
    print(lin.table())
    first = what_must_rerun(lin)
    with JobRecorder(spark) as rec:
        expected = sorted(ranks.collect())
    print(f"\nfirst run: falkirk runs {sorted(first.stages)}")
    print(f"           Spark ran   {sorted(rec.last.ran())}")
    print(f"stage DAG reported by Spark equals the lineage's: {rec.last.dag() == lin.stage_dag()}")

    lin = lineage(ranks)  # now every shuffle output is available
    lost = [s.replace("-", "_") for s in lin.units["result"].inputs]
    lose_outputs(spark, lost)
    spark_like = what_must_rerun(lin, lost)
    precise = what_must_rerun(lin, lost, fetch_failure="map-output")
    with JobRecorder(spark) as rec:
        again = sorted(ranks.collect())
    print(f"\ndeleted the files of {lost}, then ran the job again:")
    print(f"  falkirk, only those outputs lost:         {sorted(precise.stages)}")
    print(f"  falkirk, Spark's executor-loss rule:      {sorted(spark_like.stages)}")
    print(f"  Spark resubmitted (fetch failure: {rec.last.fetch_failed()}): {sorted(rec.last.ran())}")
    (links,) = [n for n, u in lin.units.items() if u.kind == "shuffle" and not u.inputs]
    print(f"why falkirk re-runs the links stage ({links}) under that rule:")
    for line in spark_like.explain(links):
        print("  " + line)
    assert again == expected, "the re-run must give the same ranks"
    assert spark_like.stages == rec.last.ran(), "falkirk and Spark disagree"
    return {"lineage": lin, "predicted": spark_like.stages, "precise": precise.stages, "spark": rec.last.ran()}


if __name__ == "__main__":
    main()
