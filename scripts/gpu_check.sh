#!/usr/bin/env bash
# The first lent GPU measures everything in one short run: set up, check the Triton kernels against the
# portable engine on CUDA (values, paths, gradients; -inf, holes, no-path rows), time the loss against
# pytorch-crf, run a bf16 transformer-CRF step, then the CUDA benchmark table. About 5 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
.venv/bin/python scripts/gpu_check.py --device cuda
.venv/bin/python scripts/bench_chain.py --device cuda --markdown --sizes 32,50,9 64,128,17 16,512,17 --repeats 20 --skip-struct
