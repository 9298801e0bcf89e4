#!/usr/bin/env bash
# Run falkirk's whole test suite: tests/ plus the package's doctests.
# Creates/refreshes .venv first (scripts/_env.sh). Extra arguments replace the
# default targets and are passed straight to pytest, e.g.
#   bash scripts/test.sh tests/test_packaging.py -q
# Environment: FALKIRK_TEST_WORKERS (xdist workers, 2; 0 = one process),
# HYPOTHESIS_PROFILE (ci for the whole suite, dev for a subset unless CI is set),
# FALKIRK_PROPERTY_EXAMPLES / FALKIRK_SCHEME_CASES (cases per solver property /
# per recovery scheme, 2,000 at CI strength), FALKIRK_EXHAUSTIVE=1 (adds a Spark
# recovery run per step boundary), FALKIRK_EXTRAS (the extras installed, dev),
# FALKIRK_TEST_JVM_OPTIONS (every test JVM's options, "-XX:TieredStopAtLevel=1
# -XX:+UseSerialGC": short-lived JVMs skip C2's compiling; "" for the defaults;
# tests/conftest.py).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/_env.sh

# The whole suite (no arguments) always runs at CI strength: the `ci`
# hypothesis profile, 2,000 cases per solver property and per recovery scheme.
# A subset (arguments given) uses the quicker `dev` defaults unless CI is set.
if (($# == 0)) || [[ -n ${CI:-} ]]; then
    HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
    export FALKIRK_PROPERTY_EXAMPLES=${FALKIRK_PROPERTY_EXAMPLES:-2000}
    export FALKIRK_SCHEME_CASES=${FALKIRK_SCHEME_CASES:-2000}
fi
HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-dev}
export HYPOTHESIS_PROFILE

if (($# > 0)); then
    exec .venv/bin/python -m pytest "$@"
fi
# Two xdist workers (FALKIRK_TEST_WORKERS=0 runs in one process): the tests
# using the shared SparkSession stay on one worker, the tests of the standalone
# cluster and the Connect server on the other (tests/conftest.py); the
# CPU-bound property tests fill in beside them. Every phase of 3 s or more is
# listed at the end (what a cut of the suite's time has to start from). Three
# workers (the executor's tests split in two groups) were tried on this 2-core
# machine: the CPU was busy throughout (1.8 % idle) and the run slower (44 % of
# the tests done after 24 minutes), so only less work shortens the suite.
workers=${FALKIRK_TEST_WORKERS:-2}
parallel=()
if [[ $workers != 0 ]]; then parallel=(-n "$workers" --dist loadgroup); fi
exec .venv/bin/python -m pytest tests --doctest-modules src/falkirk \
    -p no:cacheprovider --durations=0 --durations-min=3 "${parallel[@]}"
