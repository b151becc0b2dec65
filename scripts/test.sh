#!/usr/bin/env bash
# Set up .venv, then run the checks CI runs: ruff, ruff format --check, mypy on the core, pytest
# (engine on its default backend, the fused CPU kernel where a compiler exists), the core again on the
# portable backend, and the Triton kernels on the CPU through Triton's interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/lab_deps.sh  # chromium and playwright for the lab's browser tests (they skip, saying why, without)
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
CRFHEAD_BACKEND=portable .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/engine/test_chain.py tests/heads/test_crf.py tests/heads/test_heads.py tests/theory/test_theory.py \
  tests/inference
TRITON_INTERPRET=1 .venv/bin/python -m pytest -q -p no:cacheprovider \
  tests/engine/test_backends.py tests/engine/test_exact_scale.py tests/engine/test_fused_ops.py \
  tests/scripts/test_gpu_check.py \
  -k "triton or gpu_check"
