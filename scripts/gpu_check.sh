#!/usr/bin/env bash
# The first lent GPU measures everything in one short run (a few minutes): the environment, the loss at
# (64, 128, 17) against pytorch-crf, a bf16 transformer-CRF step, every Triton kernel against the portable
# engine on CUDA (scripts/gpu_check.py), then the CUDA benchmark table (scripts/bench_chain.py).
#
#   bash scripts/gpu_check.sh --prepare    here, where the package index is reachable: the pure-Python
#                                          wheels a GPU image lacks (pytorch-crf, the loss's anchor) into .whl/
#   bash scripts/gpu_check.sh              on the GPU machine; needs no network
#   bash scripts/gpu_check.sh --rehearse   on a CPU: the same steps, the agreement's toy cases only
#                                          through Triton's interpreter (how this script is tested)
#
# On the GPU the agreement runs its toy cases (every op), then starts no new case after 240 s, so that
# with the Triton compiles of a first run the whole check stays near 5 minutes; it says how many it ran.
#
# The device tool sends the tracked files only, so the wheels travel by name:
#   run(command="bash scripts/gpu_check.sh", carry=[".whl"], timeout_s=540)
#
# Python: $PYTHON, else .venv's when its torch sees CUDA (scripts/setup.sh installs the CPU wheel, which
# does not), else python3 (a GPU image's own torch). Nothing is installed from the network in a check:
# the wheels in $GPU_CHECK_WHEELS (default .whl) are unpacked into a temporary folder put on PYTHONPATH,
# and crfhead is read from this checkout. Every step runs even when one before it failed; the exit
# status is 1 if any failed. With $OUT set (the device tool's output folder) the log and the benchmark
# table are written there as they come, so a run stopped at its time limit still returns what it did.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WHEELS=${GPU_CHECK_WHEELS:-.whl}
mode=run
case "${1:-}" in
  "") ;;
  --prepare | --rehearse) mode=${1#--} ;;
  *) echo "usage: bash scripts/gpu_check.sh [--prepare | --rehearse]" >&2; exit 2 ;;
esac

if [ "$mode" = prepare ]; then
  set -e
  PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
  mkdir -p "$WHEELS"
  "$PY" -m pip download -q --no-deps --only-binary=:all: -d "$WHEELS" "pytorch-crf==0.7.2"
  echo "wheels in $WHEELS: $(cd "$WHEELS" && ls ./*.whl | tr '\n' ' ')"
  echo "now: run(command=\"bash scripts/gpu_check.sh\", carry=[\"$WHEELS\"], timeout_s=540)"
  exit 0
fi

sees_cuda() { "$1" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; }
if [ -n "${PYTHON:-}" ]; then
  PY=$PYTHON
elif [ -x .venv/bin/python ] && { [ "$mode" = rehearse ] || sees_cuda .venv/bin/python; }; then
  PY=.venv/bin/python
else
  PY=python3
fi
if [ "$mode" = run ] && ! sees_cuda "$PY"; then
  echo "gpu_check: $PY has no torch that sees a CUDA device; on a CPU, rehearse: bash scripts/gpu_check.sh --rehearse" >&2
  exit 2
fi

site=$(mktemp -d "${TMPDIR:-/tmp}/crfhead-gpu-check.XXXXXX")
trap 'rm -rf "$site"' EXIT
if compgen -G "$WHEELS/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check \
    --target "$site" "$WHEELS"/*.whl || { echo "gpu_check: could not unpack the wheels in $WHEELS" >&2; exit 2; }
fi
export PYTHONPATH="$ROOT:$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

log=/dev/null table=/dev/null
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  log=$OUT/gpu_check.log table=$OUT/bench_cuda.md
fi
if [ "$mode" = rehearse ]; then
  export TRITON_INTERPRET=1
  device=cpu check_args=(--device cpu --budget 0)  # the toy agreement cases only
  bench_args=(--sizes 2,8,5 --repeats 2 --no-memory)
  [ "$table" = /dev/null ] || table=$OUT/bench_cpu.md
else
  device=cuda check_args=(--device cuda --budget 240)
  bench_args=(--sizes 32,50,9 64,128,17 16,512,17 --repeats 20)
fi

failed=()
step() {  # step NAME COMMAND...: run it, log it, time it; a failure is recorded, not fatal
  local name=$1 start=$SECONDS rc
  shift
  echo "== $name" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then
    echo "== $name: ok in $((SECONDS - start)) s" | tee -a "$log"
  else
    echo "== $name: FAILED (exit $rc) after $((SECONDS - start)) s" | tee -a "$log"
    failed+=("$name")
  fi
}
environment() {
  "$PY" - "$site" <<'EOF'
import platform, sys
from pathlib import Path
import torch
print(f"python {platform.python_version()} at {sys.executable}; torch {torch.__version__}, CUDA {torch.version.cuda}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"device {p.name}, {p.total_memory / 2**30:.1f} GiB, {p.multi_processor_count} SMs")
for name in ("triton", "transformers", "torchcrf", "crfhead"):
    try:
        mod = __import__(name)
        print(f"{name} {getattr(mod, '__version__', '?')} from {Path(mod.__file__).parent}")
    except ImportError as e:
        print(f"{name}: not importable ({e})")
print("from the wheels:", " ".join(sorted(p.name for p in Path(sys.argv[1]).glob("*.dist-info"))) or "none")
EOF
}
table() { "$PY" scripts/bench_chain.py --device "$device" --markdown --skip-struct "${bench_args[@]}" | tee "$table"; }

step environment environment
step "checks ($device): timing, bf16 step, agreement" "$PY" scripts/gpu_check.py "${check_args[@]}"
step "benchmark table ($device)" table
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu_check: FAILED: ${failed[*]}" | tee -a "$log"
  exit 1
fi
echo "gpu_check: every step ok" | tee -a "$log"
