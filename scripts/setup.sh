#!/usr/bin/env bash
# Create .venv (if missing) and install swembed with everything needed to build, evaluate and test.
# CPU-only machines get the CPU build of torch (a few hundred MB instead of several GB of CUDA wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
if ! python -c "import torch" 2>/dev/null; then
  # CPU-only machines: the CPU build from PyTorch's index when it is reachable, else PyPI's build.
  if command -v nvidia-smi >/dev/null 2>&1 \
     || ! python -m pip install -q --timeout 20 --retries 1 torch --index-url https://download.pytorch.org/whl/cpu \
          2>/dev/null; then
    python -m pip install -q torch
  fi
fi
python -m pip install -q -e ".[build,eval,test]"
echo "swembed installed in .venv ($(python -c 'import swembed; print(swembed.__version__)'))"
