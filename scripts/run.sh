#!/usr/bin/env bash
# falkirk's main job: the paper's Figure 1 pipeline on PySpark with an injected
# failure of the lazy-checkpoint step, falkirk's selective recovery, the
# recovery report, and a check that the output equals a failure-free run
# (exit status 1 otherwise). Creates/refreshes .venv first (scripts/_env.sh).
# Arguments go to `python -m falkirk.spark.demo` (see --help), e.g.
#   bash scripts/run.sh --fail heavy@4:before --epochs 8
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/_env.sh

# PySpark comes with the `spark` extra; add it if this environment lacks it.
if ! .venv/bin/python -c 'import pyspark' >/dev/null 2>&1; then
    export FALKIRK_EXTRAS="${FALKIRK_EXTRAS:-dev},spark"
    source scripts/_env.sh
fi

exec .venv/bin/python -m falkirk.spark.demo "$@"
