"""Storage under the pipeline's root: every byte a recovery may need, and how it proves itself.

* :mod:`~falkirk.spark.pipeline.store.rootfs` — the root as shared storage
  reached by URI (fsspec on the driver, Hadoop on the executors): write-once
  publish, atomic replace, checksums. **A new storage backend goes here**
  (its roles: :mod:`~falkirk.spark.pipeline.store.schemes`,
  :mod:`~falkirk.spark.pipeline.store.connectors`,
  :mod:`~falkirk.spark.pipeline.store.fscalls`,
  :mod:`~falkirk.spark.pipeline.store.writeonce`,
  :mod:`~falkirk.spark.pipeline.store.localdisk`);
* :mod:`~falkirk.spark.pipeline.store.storage` — manifests (write-once, with
  each data file's size and checksum: :mod:`~falkirk.spark.pipeline.store.manifest`),
  checkpoints, logs and outputs as Parquet (read back with Spark:
  :mod:`~falkirk.spark.pipeline.store.frames`), data no manifest names
  (:mod:`~falkirk.spark.pipeline.store.sweep`), an Eager step's database
  (:mod:`~falkirk.spark.pipeline.store.eagerdb`);
* :mod:`~falkirk.spark.pipeline.store.inputlog` — partitioned, append-only
  input logs cut into epochs (:mod:`~falkirk.spark.pipeline.store.inputcuts`),
  read again (:mod:`~falkirk.spark.pipeline.store.inputread`) and collected
  (:mod:`~falkirk.spark.pipeline.store.inputgc`): their Parquet segments and manifests
  (:mod:`~falkirk.spark.pipeline.store.segments`), what an append takes
  (:mod:`~falkirk.spark.pipeline.store.ingest`; a Spark DataFrame:
  :mod:`~falkirk.spark.pipeline.store.sparkinput`), the input's schema as Arrow
  (:mod:`~falkirk.spark.pipeline.store.arrowschema`), records checked column by
  column (:mod:`~falkirk.spark.pipeline.store.convert`) against the rules of
  :mod:`~falkirk.spark.pipeline.store.records`;
* :mod:`~falkirk.spark.pipeline.store.keyed` — keyed state laid out by key group
  (and redistributed when the number of partitions changes).

May import: :mod:`falkirk.spark.errors` (PySpark only inside functions that
need it). Nothing else of :mod:`falkirk.spark.pipeline`: the store knows
files, not pipelines.
"""
