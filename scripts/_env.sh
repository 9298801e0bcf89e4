#!/usr/bin/env bash
# shellcheck shell=bash
# Shared set-up for scripts/run.sh and scripts/test.sh (sourced, not run).
#
# 1. checks python3 >= 3.11 and Java >= 17 (scripts/_java.sh);
# 2. creates .venv if missing;
# 3. installs the project editable with extras ${FALKIRK_EXTRAS:-dev} when
#    pyproject.toml (or the extras) changed since the last install, or when
#    the venv's falkirk is not this checkout's src/falkirk.
#
# Progress goes to stderr so the callers' stdout stays clean.
set -euo pipefail

FALKIRK_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$FALKIRK_ROOT"

_setup_say() { printf '[setup] %s\n' "$*" >&2; }

# --- Python -----------------------------------------------------------------
if ! command -v python3 >/dev/null 2>&1; then
    _setup_say "error: python3 not found on PATH; falkirk needs Python 3.11 or newer."
    exit 1
fi
if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    _setup_say "error: falkirk needs Python 3.11 or newer, but python3 on PATH is" \
        "$(python3 -c 'import sys; print(sys.version.split()[0])' 2>/dev/null || echo unknown)" \
        "($(command -v python3)). Install Python 3.11+ and put it first on PATH as python3."
    exit 1
fi

# --- Java -------------------------------------------------------------------
# shellcheck source=scripts/_java.sh
source "$FALKIRK_ROOT/scripts/_java.sh"
falkirk_check_java || exit 1

# --- .venv ------------------------------------------------------------------
FALKIRK_EXTRAS=${FALKIRK_EXTRAS:-dev}
_venv_py=.venv/bin/python
_stamp=.venv/.falkirk-install-stamp

# (Re)create the venv if it is missing or its interpreter no longer runs.
if [[ ! -x $_venv_py ]] || ! "$_venv_py" -c 'import sys' >/dev/null 2>&1; then
    [[ -e .venv ]] && _setup_say "removing broken .venv" && rm -rf .venv
    _setup_say "creating .venv"
    if ! python3 -m venv .venv; then
        _setup_say "error: 'python3 -m venv .venv' failed; on Debian/Ubuntu install python3-venv."
        exit 1
    fi
    _setup_say "upgrading pip"
    "$_venv_py" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 \
        || _setup_say "warning: could not upgrade pip; continuing with the bundled one"
fi

# Stamp = sha256 of pyproject.toml plus the extras it was installed with.
_want_stamp="$("$_venv_py" -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())') extras=$FALKIRK_EXTRAS"
_have_stamp=$(cat "$_stamp" 2>/dev/null || true)

# Is the venv's falkirk this checkout's src/falkirk? (Checked by locating the
# package rather than importing it, so a bug in falkirk's own code does not
# trigger a reinstall on every run; pytest will report such a bug instead.)
_falkirk_installed_here() {
    "$_venv_py" - "$FALKIRK_ROOT/src/falkirk" <<'PY' >/dev/null 2>&1
import importlib.util, os, sys
spec = importlib.util.find_spec("falkirk")
locs = list(spec.submodule_search_locations or []) if spec else []
want = os.path.realpath(sys.argv[1])
sys.exit(0 if any(os.path.realpath(p) == want for p in locs) else 1)
PY
}

if [[ $_want_stamp != "$_have_stamp" ]] || ! _falkirk_installed_here; then
    _setup_say "installing falkirk[$FALKIRK_EXTRAS] into .venv"
    rm -f "$_stamp"
    if ! "$_venv_py" -m pip install --quiet --disable-pip-version-check -e ".[$FALKIRK_EXTRAS]" \
        >.venv/install.log 2>&1; then
        tail -n 30 .venv/install.log >&2
        _setup_say "error: installing falkirk[$FALKIRK_EXTRAS] failed (full log: .venv/install.log)"
        exit 1
    fi
    printf '%s\n' "$_want_stamp" >"$_stamp"
else
    _setup_say "environment up to date"
fi
unset _venv_py _stamp _want_stamp _have_stamp
