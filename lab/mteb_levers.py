"""Levers for MTEB classification and retrieval, scored on dev data only (issue 51).

Each variant of a table is scored on
* the four classifiers' **dev** split (``swembed.eval.mteb_tasks``: every fifth train row held out, MTEB's own
  undersampling and LogisticRegression on the rest; no test file is read);
* a **retrieval dev set** made from the corpora: blocks of 9 consecutive sentences of WikiText-2 and the gensim
  Wikipedia sample (one article's prose); the middle sentence is the query, the other 8 the document, ranked
  among all blocks by cosine; nDCG@10 with one relevant document (SciFact's shape: a one-sentence claim against
  a paragraph-long abstract). The table saw these sentences one by one in training, never as query-document pairs;
* a **docstring retrieval dev set** out of the corpora (``docstring_dev``): the summary line of each documented
  function or class of the installed scipy, scikit-learn, sympy, networkx, numpy, pandas and matplotlib (read
  with ``ast``, nothing imported) against its description paragraphs, ranked among all of them by cosine: text no
  build read, with words the vocabulary lacks (SciFact's queries have 11% unknown words; the set above none);
* STS-B dev (Spearman x100), so a lever that costs STS shows it;
* with ``--pairs-dev FILE``, a held-out set of ``query<TAB>document`` pairs (each query's document ranked among
  all the file's documents; ``lab.debian_descriptions --dev-out``): the in-domain check of a ``[retrieval]``
  lever, whose training pairs come from the same source.

    python -m lab.mteb_levers MODEL --data ../shared/data --variants base,scale:4,sif:1000 \\
        --json reports/mteb-levers/NAME.json

Variants (comma-separated): ``base``; ``scale:S`` (vectors times S: MTEB's classifier is LogisticRegression(C=1)
on raw vectors, so the scale is its regularisation); ``sif:K`` (each word row times K / (K + n), n the
sentences the word was seen in (word_contexts.npy): smooth inverse frequency with a = K / sentences; rows of
pieces, grams and words encoded alone keep weight 1); ``zipf:P`` (each word row times (log(1 + r) / log(1 + V))^P,
r the word's frequency rank, 1 for the most frequent, V the words: model2vec's Zipf weighting, softened by P;
the rarest word and the rows of pieces and grams keep weight 1);
``center`` (the mean vector of corpus paragraphs subtracted, then re-normalised); ``sentences`` (a text is the
mean of its sentences' unit vectors: long documents weigh each sentence alike); ``oov:W`` (an unknown word
weighs W in the mean, the tokenisation setting ``oov_weight``); ``minctx:K`` (the words
seen in K sentences or fewer lose their rows and back off to pieces and grams, as unknown words do);
``words:LIST`` (each word of the word list LIST
the table lacks gets the row a build with ``[vocab] word_lists`` gives a word seen in no sentence: the teacher's
vector of the word read alone, carried into the table by the ridge map of ``swembed.pipeline.alone`` fitted on
the words seen in >= 20 sentences, instead of the back-off through pieces and grams; needs ``--work``, the
build's work folder with its alone stage; no rebuild; the report's list is Debian's ``wamerican-huge``:
``apt-get install wamerican-huge``). ``sif:K+scale:S`` combines (sif first).
"""
from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from swembed.eval.models import load_encoder
from swembed.eval.mteb_tasks import CLASSIFICATION, evaluate_mteb
from swembed.eval.sts import DEV, evaluate_sts
from swembed.pipeline.parallel import read_parallel

Encoder = Callable[[list[str]], np.ndarray]
RETRIEVAL_SOURCES = ("corpora/en/wikitext2.txt.gz", "corpora/en/gensim_enwiki.txt.gz")
BLOCK = 9
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def wiki_blocks(data: Path) -> list[list[str]]:
    """Every run of ``BLOCK`` consecutive non-empty lines of the ``RETRIEVAL_SOURCES``, file by file."""
    blocks = []
    for source in RETRIEVAL_SOURCES:
        with gzip.open(data / source, "rt", encoding="utf-8") as handle:
            lines = [line.strip() for line in handle if line.strip()]
        blocks += [lines[i : i + BLOCK] for i in range(0, len(lines) - BLOCK + 1, BLOCK)]
    return blocks


def dev_block_ids(n_blocks: int, n_docs: int = 4000, seed: int = 0) -> tuple[list[int], np.random.Generator]:
    """The blocks ``retrieval_dev`` makes its documents of (sorted), and the generator that then draws its queries."""
    rng = np.random.default_rng(seed)
    return sorted(rng.choice(n_blocks, size=min(n_docs, n_blocks), replace=False).tolist()), rng


def retrieval_dev(data: Path, n_docs: int = 4000, n_queries: int = 500, seed: int = 0):
    """(queries, documents, index of each query's document): see the module docstring."""
    blocks = wiki_blocks(data)
    ids, rng = dev_block_ids(len(blocks), n_docs, seed)
    chosen = [blocks[i] for i in ids]
    middle = BLOCK // 2
    docs = [" ".join(b[:middle] + b[middle + 1 :]) for b in chosen]
    gold = rng.choice(len(chosen), size=min(n_queries, len(chosen)), replace=False)
    queries = [chosen[i][middle] for i in gold]
    return queries, docs, gold


DOCSTRING_PACKAGES = ("scipy", "sklearn", "sympy", "networkx", "numpy", "pandas", "matplotlib")
_SECTION = re.compile(r"^\s*(Parameters|Returns|Examples|Notes|See Also|References|Attributes|Raises|Yields|Methods|"
                      r"Other Parameters|Warnings|Args|Arguments)\s*$", re.M)


def docstring_dev(packages: tuple[str, ...] = DOCSTRING_PACKAGES):
    """(queries, documents, index of each query's document): the first paragraph of a docstring (5-30 words)
    against the paragraphs after it and before its first section (40 words or more), for every function and class
    of ``packages`` outside their tests; docstrings with markup (backquotes, ``=``, ``$``, braces) left out, and a
    text seen twice kept once. Depends on the installed versions (``scripts/setup.sh`` pins them)."""
    import importlib.util

    queries, docs, seen = [], [], set()
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for path in sorted(Path(spec.submodule_search_locations[0]).rglob("*.py")):
            if "tests" in path.parts:
                continue
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                doc = ast.get_docstring(node)
                paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", _SECTION.split(doc or "")[0])
                              if p.strip()]
                if len(paragraphs) < 2:
                    continue
                query, body = paragraphs[0], " ".join(paragraphs[1:])
                if (not 5 <= len(query.split()) <= 30 or len(body.split()) < 40 or any(c in body for c in "`>=\\$|{}")
                        or any(c in query for c in "`=\\$") or query in seen or body in seen):
                    continue
                seen.update((query, body))
                queries.append(query)
                docs.append(body)
    return queries, docs, np.arange(len(docs))


def ndcg_per_query(encode: Encoder, queries: list[str], docs: list[str], gold: np.ndarray) -> np.ndarray:
    """Each query's nDCG@10 (0..1) with one relevant document, cosine ranking."""
    q, d = _unit(encode(queries)), _unit(encode(docs))
    sims = q @ d.T
    rank = (sims > sims[np.arange(len(gold)), gold][:, None]).sum(axis=1)  # documents scored above the gold one
    return np.where(rank < 10, 1 / np.log2(rank + 2), 0.0)


def ndcg_at_10(encode: Encoder, queries: list[str], docs: list[str], gold: np.ndarray) -> float:
    """nDCG@10 x 100 with one relevant document per query, cosine ranking."""
    return float(100 * np.mean(ndcg_per_query(encode, queries, docs, gold)))


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def sentence_mean(encode: Encoder, texts: list[str]) -> np.ndarray:
    """Each text split after . ! ? into sentences, each sentence encoded and normalised, their mean normalised."""
    parts, owner = [], []
    for i, text in enumerate(texts):
        pieces = [p for p in SENTENCE_END.split(text) if p.strip()] or [text]
        parts += pieces
        owner += [i] * len(pieces)
    vectors = _unit(encode(parts))
    out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
    np.add.at(out, np.array(owner), vectors)
    return _unit(out)


def list_words(path: Path, tokenizer) -> list[str]:
    """The list's entries that the tokeniser reads as one word of letters the table lacks, as it writes them."""
    out, seen = [], set()
    for line in path.read_text(encoding="utf-8").split("\n"):
        words = tokenizer.words(line.strip())
        if len(words) == 1 and words[0].isalpha() and words[0] not in tokenizer.vocab and words[0] not in seen:
            seen.add(words[0])
            out.append(words[0])
    return out


def with_listed_words(spec: str, work: Path, word_list: Path):
    """The table ``spec`` plus one row per word of ``word_list`` it lacks, appended after every other row."""
    from swembed import load
    from swembed.pipeline import files
    from swembed.pipeline.alone import alone_map
    from swembed.runtime import StaticEmbedder
    from swembed.runtime.tokenizer import WordTokenizer
    from swembed.teachers import load_teacher

    model = load(spec)
    if model.scales is not None:
        raise SystemExit(f"{spec}: words:LIST needs a float table (this one is quantised)")
    table, contexts = np.asarray(model.table, dtype=np.float32), np.asarray(model.word_contexts)
    alone = np.load(next(work.glob("alone-*")) / files.ALONE)
    if len(alone) != len(contexts):
        raise SystemExit(f"{work}: its alone stage has {len(alone)} words, the table {len(contexts)}")
    new = list_words(word_list, model.tokenizer)
    vectors = load_teacher(model.config["teacher"]["name"], device="cpu").encode(new)
    added = alone_map(alone, table[: len(contexts)], contexts)(vectors).astype(np.float32)
    vocab = {**model.tokenizer.vocab, **{w: len(table) + i for i, w in enumerate(new)}}
    old = model.tokenizer
    tokenizer = WordTokenizer(vocab, old.rules, old.teacher_tokenizer, old.piece_rows, old.gram_rows)
    print(f"words:{word_list}: {len(new):,} words added", file=sys.stderr)
    return StaticEmbedder(np.vstack([table, added]), tokenizer, model.config)


def sif_weights(counts: np.ndarray, k: float) -> np.ndarray:
    """Smooth inverse frequency: K / (K + n), n = the sentences each word was seen in."""
    return k / (k + counts)


def zipf_weights(counts: np.ndarray, power: float) -> np.ndarray:
    """(log(1 + r) / log(1 + V))^P, r = each word's frequency rank (1 = the most frequent), V = the words."""
    rank = np.empty(len(counts))
    rank[np.argsort(-counts, kind="stable")] = np.arange(1, len(counts) + 1)
    return (np.log1p(rank) / np.log1p(len(counts))) ** power


def reweighted(spec: str, weights_of: Callable[[np.ndarray, float], np.ndarray], value: float) -> Encoder:
    """The table ``spec`` with each word row times ``weights_of(counts, value)``; pieces and grams keep 1."""
    from swembed import load
    from swembed.runtime import StaticEmbedder

    model = load(spec)
    table = model.float_rows()
    counts = np.asarray(model.word_contexts, dtype=np.float64)
    weights = np.ones(len(table), dtype=np.float32)
    weights[: len(counts)] = weights_of(counts, value)
    return StaticEmbedder(table * weights[:, None], model.tokenizer, model.config, None, model.tokenizers,
                          model.word_contexts).encode


def retokenized(spec: str, oov_weight: float | None = None, min_contexts: int = 0) -> Encoder:
    """The table ``spec`` read by a changed tokeniser: unknown words weighing ``oov_weight`` in the mean, and the
    words seen in fewer than ``min_contexts`` sentences treated as unknown (they back off to pieces and grams)."""
    from dataclasses import replace

    from swembed import load
    from swembed.runtime import StaticEmbedder
    from swembed.runtime.tokenizer import WordTokenizer

    model = load(spec)
    old, counts = model.tokenizer, np.asarray(model.word_contexts)
    rules = old.rules if oov_weight is None else replace(old.rules, oov_weight=oov_weight)
    vocab = {w: r for w, r in old.vocab.items() if r >= len(counts) or counts[r] >= min_contexts}
    tokenizer = WordTokenizer(vocab, rules, old.teacher_tokenizer, old.piece_rows, old.gram_rows)
    return StaticEmbedder(model.table, tokenizer, model.config, model.scales, None, model.word_contexts,
                          model.codes).encode


TABLE_VARIANTS = ("sif", "zipf", "oov", "minctx", "words")  # they rebuild a swembed table's encoder


def _part_encoder(part: str, encode: Encoder, spec: str, corpus_sample: list[str], work: Path | None,
                  variant: str) -> Encoder:
    """The encode function after one part ``name:value`` (not ``scale``) of ``variant`` on top of ``encode``."""
    name, _, value = part.partition(":")

    def listed_words() -> Encoder:
        if work is None:
            raise SystemExit(f"{variant}: words:LIST needs --work (the build's work folder)")
        return with_listed_words(spec, work, Path(value)).encode

    builders: dict[str, Callable[[], Encoder]] = {
        # per-word weights (the runtime has no such setting: neither was adopted)
        "sif": lambda: reweighted(spec, sif_weights, float(value)),
        "zipf": lambda: reweighted(spec, zipf_weights, float(value)),
        "center": lambda: (lambda inner, mu: lambda texts: _unit(inner(texts) - mu))(
            encode, encode(corpus_sample).mean(axis=0)),
        # a long text = the mean of its sentences' unit vectors
        "sentences": lambda: lambda texts: sentence_mean(encode, texts),
        # unknown words weigh W in the mean (tokenisation setting oov_weight)
        "oov": lambda: retokenized(spec, oov_weight=float(value)),
        # words seen in <= K sentences lose their rows and back off to pieces and grams
        "minctx": lambda: retokenized(spec, min_contexts=int(value) + 1),
        "words": listed_words,
    }
    if name not in builders:
        raise SystemExit(f"unknown variant part {part!r}")
    return builders[name]()


def variant_encoder(spec: str, variant: str, corpus_sample: list[str], work: Path | None = None) -> Encoder:
    """The encode function of one variant of the table ``spec``: its parts in order, then ``scale``."""
    kind, encode, _ = load_encoder(spec)
    scale = 1.0
    for part in (p for p in variant.split("+") if p != "base"):
        name, _, value = part.partition(":")
        if name in TABLE_VARIANTS and kind != "swembed":
            raise SystemExit(f"{variant}: {name} needs a swembed table (word_contexts.npy)")
        if name == "scale":
            scale = float(value)
        else:
            encode = _part_encoder(part, encode, spec, corpus_sample, work, variant)
    if scale != 1.0:
        encode = (lambda inner, s: lambda texts: s * inner(texts))(encode, scale)
    return encode


def pairs_dev(path: Path):
    """(queries, documents, index of each query's document) of a ``query<TAB>document`` file (plain or .gz), read
    as a build reads ``[retrieval] files`` (``read_parallel``); a document asked for by several queries is ranked
    once."""
    pairs = read_parallel([str(path)])
    index: dict[str, int] = {}
    relevant = np.array([index.setdefault(d, len(index)) for _, d in pairs])
    return [q for q, _ in pairs], list(index), relevant


def score_variant(encode: Encoder, data: Path, retrieval, docstrings, pairs=None) -> dict[str, float]:
    scores = evaluate_mteb(encode, data / "eval-mteb", CLASSIFICATION, split="dev")
    scores["classification dev mean"] = scores.pop("mean")
    scores["retrieval dev nDCG@10"] = ndcg_at_10(encode, *retrieval)
    scores["docstring dev nDCG@10"] = ndcg_at_10(encode, *docstrings)
    scores["STS-B dev"] = evaluate_sts(encode, data / "eval", (DEV,))[DEV]
    if pairs is not None:
        scores["pairs dev nDCG@10"] = ndcg_at_10(encode, *pairs)
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a swembed folder, model2vec:<folder>, wordllama or a teacher")
    parser.add_argument("--data", default="../shared/data", help="the shared data folder (eval, eval-mteb, corpora)")
    parser.add_argument("--variants", default="base")
    parser.add_argument("--json", help="append one JSON line per variant here")
    parser.add_argument("--work", type=Path, help="the build's work folder (for words:LIST)")
    parser.add_argument("--pairs-dev", type=Path, help="held-out query<TAB>document pairs to rank as well")
    args = parser.parse_args(argv)
    data = Path(args.data)
    retrieval, docstrings = retrieval_dev(data), docstring_dev()
    sample = retrieval_dev(data, n_docs=20000, n_queries=0, seed=1)[1]  # for ``center``: documents, not queries
    for variant in args.variants.split(","):
        start = time.time()
        scores = score_variant(variant_encoder(args.model, variant, sample, args.work), data, retrieval, docstrings,
                               pairs_dev(args.pairs_dev) if args.pairs_dev else None)
        row = {"model": args.model, "variant": variant, "scores": scores, "seconds": round(time.time() - start, 1),
               **({"work": str(args.work)} if args.work else {}),
               **({"pairs_dev": str(args.pairs_dev)} if args.pairs_dev else {})}
        print(json.dumps(row), flush=True)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            with open(args.json, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
