#!/usr/bin/env bash
# Set up .venv, then run the checks CI runs: ruff, ruff format --check, mypy on the core, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
