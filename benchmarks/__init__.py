"""Benchmarks of falkirk (issue 9): graph families and timing scripts; results in ``benchmarks/results/``."""
