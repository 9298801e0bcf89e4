"""Long runs under random faults (issue 58): ``python -m benchmarks.soak --variant local|cluster|s3``.

A supervisor (:mod:`~benchmarks.soak.supervisor`) runs the soak pipeline (:mod:`~benchmarks.soak.workload`,
every regime) for thousands of epochs as a series of driver processes (:mod:`~benchmarks.soak.driver`), does
the faults of a seeded schedule (:mod:`~benchmarks.soak.schedule`, :mod:`~benchmarks.soak.faults`) in and
around them, checks the outputs, the root and the trends as it goes (:mod:`~benchmarks.soak.checks`), logs
everything to an append-only event log (:mod:`~benchmarks.soak.log`; a stopped soak resumes from it) and
reports from that log (:mod:`~benchmarks.soak.report`). The environments are in
:mod:`~benchmarks.soak.variants` and :mod:`~benchmarks.soak.s3`. ``benchmarks/README.md`` has the runs.
"""
