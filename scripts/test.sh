#!/usr/bin/env bash
# Run falkirk's whole test suite: tests/ plus the package's doctests.
# Creates/refreshes .venv first (scripts/_env.sh). Extra arguments replace the
# default targets and are passed straight to pytest, e.g.
#   bash scripts/test.sh tests/test_packaging.py -q
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/_env.sh

if [[ -z ${HYPOTHESIS_PROFILE:-} ]]; then
    if [[ -n ${CI:-} ]]; then HYPOTHESIS_PROFILE=ci; else HYPOTHESIS_PROFILE=dev; fi
fi
export HYPOTHESIS_PROFILE

if (($# > 0)); then
    exec .venv/bin/python -m pytest "$@"
fi
# Two xdist workers (FALKIRK_TEST_WORKERS=0 runs in one process): every test
# using the shared SparkSession stays on one worker (tests/conftest.py), the
# CPU-bound property tests run on the other.
workers=${FALKIRK_TEST_WORKERS:-2}
parallel=()
if [[ $workers != 0 ]]; then parallel=(-n "$workers" --dist loadgroup); fi
exec .venv/bin/python -m pytest tests --doctest-modules src/falkirk \
    -p no:cacheprovider "${parallel[@]}"
