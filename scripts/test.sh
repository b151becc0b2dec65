#!/usr/bin/env bash
# Set up .venv, then run the checks CI runs (.ci/run calls this): ruff, ruff format --check, mypy on
# the package, and pytest in four passes, each on two workers:
#   1. the whole suite, one intra-op thread per worker (OMP_NUM_THREADS=1);
#   2. at the default thread count, the tests whose arithmetic the thread count can reach: no result
#      may depend on it. Those are the ones with tensors large enough for torch to split an op
#      across threads (32,768 values and up: training, encoders, inference, the theory's and the
#      lab's fits) and the fused kernel's own threads (tests/engine/test_cpu_threads.py). The
#      engine's and heads' oracles use tiny chains, which torch runs on one thread at any count,
#      and the kernel computes each sequence alone whatever its thread count; the other tests check
#      messages, files, exit codes, readers and processes;
#   3. the core again on the portable backend;
#   4. the Triton kernels on the CPU through Triton's interpreter.
# With two threads per worker, OpenMP's idle threads wait passively rather than spin on the cores
# the other worker needs (OMP_WAIT_POLICY only changes how idle threads wait).
#
#   bash scripts/test.sh           the default suite
#   bash scripts/test.sh --full    every pass with the slow exhaustive variants too (tests marked slow,
#                                  300 Hypothesis examples a property, 1,000 higher-order groups, the
#                                  interpreter at full size and exact gradchecks)
# Other arguments go to pass 1 only (-k NAME, a test path, -x).
set -euo pipefail
cd "$(dirname "$0")/.."
full=()
rest=()
for arg in "$@"; do
  if [ "$arg" = --full ]; then full=(--full); else rest+=("$arg"); fi
done

phase() {  # phase NAME COMMAND...: run the command, then say how long it took
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "scripts/test.sh: $name took $((SECONDS - start)) s" >&2
}

phase setup bash scripts/setup.sh
phase "lab browser" bash scripts/lab_deps.sh  # chromium, playwright (the browser tests skip, saying why, without)
phase ruff .venv/bin/ruff check .
.venv/bin/ruff format --check .
phase mypy .venv/bin/mypy
# The fused CPU kernel and its dispatcher ops, built once here rather than by both workers at once.
.venv/bin/python -c "from crfhead.engine.backends.cpu import dispatcher; dispatcher.status()"

PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=25)
THREAD_SENSITIVE=(
  tests/training/test_training.py tests/encoders tests/inference tests/theory
  tests/lab/test_payloads.py tests/engine/test_cpu_threads.py
  -m "not thread_invariant"  # token counts, files, processes
)
CORE=(tests/engine/test_chain.py tests/heads/test_crf.py tests/heads/test_heads.py
  tests/theory/test_theory.py tests/inference)
TRITON=(tests/engine/test_backends.py tests/engine/test_exact_scale.py tests/engine/test_fused_ops.py
  tests/engine/test_table.py tests/scripts/test_gpu_check.py tests/heads/test_allowed.py
  -k "triton or gpu_check")

phase "pass 1, the suite on 1 thread" \
  env OMP_NUM_THREADS=1 "${PYTEST[@]}" ${full[@]+"${full[@]}"} ${rest[@]+"${rest[@]}"}
phase "pass 2, at the default $(.venv/bin/python -c 'import torch; print(torch.get_num_threads())') thread(s)" \
  env OMP_WAIT_POLICY=PASSIVE "${PYTEST[@]}" ${full[@]+"${full[@]}"} "${THREAD_SENSITIVE[@]}"
phase "pass 3, portable backend" \
  env OMP_NUM_THREADS=1 CRFHEAD_BACKEND=portable "${PYTEST[@]}" ${full[@]+"${full[@]}"} "${CORE[@]}"
phase "pass 4, triton interpreter" \
  env OMP_NUM_THREADS=1 TRITON_INTERPRET=1 "${PYTEST[@]}" ${full[@]+"${full[@]}"} "${TRITON[@]}"
