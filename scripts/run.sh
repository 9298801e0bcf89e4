#!/usr/bin/env bash
# falkirk's main job. Creates/refreshes .venv first (scripts/_env.sh).
# For now it solves the SPEC example; this switches to the Spark demo when
# that lands. Arguments are passed to the example.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/_env.sh

exec .venv/bin/python examples/solve_spec_example.py "$@"
