"""Training and dev splits of documents and query -> passage pairs, made before a build reads anything
(``[splits]`` in a recipe, or ``swembed data splits``), and the pseudo-queries derived from the documents.

Every document (``.docs.jsonl`` files: ``id``, ``title``, ``text``) and every pair (``query<TAB>passage`` files)
goes to dev when the first hex digit of the SHA-1 of its key is 0 (about 1 in 16: a document's file name and id, a
pair's passage), so a passage asked for by several questions is on one side only. Written to ``out``:

* ``documents.txt.gz``: the training documents, one a line (title, when it is not the text's first sentence,
  then the text; SumPubMed's ``<dig>`` placeholders removed; cut to ``max_words`` words);
* ``pairs.tsv.gz``: the training pairs, ``query<TAB>passage`` (passages cut the same way): ``[retrieval] files``;
* ``pseudo.tsv.gz``: pseudo-queries from the training documents: the first sentence -> the rest of the document,
  and one seeded middle sentence -> the document without it (``pseudo_middles`` > 1: that many middle sentences a
  document, the others drawn by a generator of their own and listed after every document's first two, so the dev
  files, the training pairs and those first two stay as they are): ``[retrieval] files``;
* ``retrieval.tsv.gz``: a seeded sample of both, at most ``sample[source]`` pairs a source;
* ``dev.tsv.gz`` and ``dev-SOURCE.tsv.gz``: the dev pairs and the dev documents' pseudo-queries (all, and one
  file a source), for choosing settings (``lab.mteb_levers --pairs-dev``, ``lab.heldout_retrieval``);
* ``dev_sentences.txt.gz``: every sentence of the dev texts, for a recipe's ``exclude``;
* ``splits.json``: what made them (inputs' digests, settings); a rerun with the same inputs writes nothing.

The files' bytes depend on their lines only (gzip without a name or a time), so a build's caches stay valid.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import random
import re
from dataclasses import dataclass
from pathlib import Path

from swembed.pipeline.sources import content_digest, expand_sources
from swembed.runtime.outputs import atomic_file
from swembed.runtime.ranges import Range
from swembed.runtime.settings import Key, setting

logger = logging.getLogger(__name__)


class SplitsError(ValueError):
    """The splits' inputs cannot be read, or their folder holds files swembed did not write."""


@dataclass
class SplitsConfig:
    """Training and dev splits made before the build reads anything (``swembed.pipeline.splits``, also ``swembed
    data splits``): ``documents`` (``.docs.jsonl`` files: ``id``, ``title``, ``text``) and ``pairs``
    (``query<TAB>passage`` files), each document or pair held out for dev by a hash of its key (1 in 16), written
    to the folder ``out``: training pairs and pseudo-queries (for ``[retrieval] files``), documents, dev pairs and
    the dev texts' sentences (for ``exclude``). ``max_words`` cuts training documents and passages; ``sample``:
    pairs per source in ``retrieval.tsv.gz``; ``pseudo_middles``: middle sentences a training document gives as
    pseudo-queries (each -> the document without it; dev keeps one). No ``out``: off."""

    # what the splits write reaches a stage's key as the files it reads ([retrieval] files, exclude): Key.BY_STAGE
    documents: list[str] = setting(key=Key.BY_STAGE, factory=list)
    pairs: list[str] = setting(key=Key.BY_STAGE, factory=list)
    out: str = setting("", key=Key.BY_STAGE)
    max_words: int = setting(200, key=Key.BY_STAGE, within=Range(1))
    sample: dict[str, int] = setting(key=Key.BY_STAGE, factory=lambda: {"scitldr": 4000, "medquad": 2000,
                                                                       "agnews": 500, "pseudo": 2500})
    pseudo_middles: int = setting(1, key=Key.BY_STAGE, within=Range(1))

MANIFEST = "splits.json"
SEED = 0
_DIG = re.compile(r"\s*<dig>\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def is_dev(key: str) -> bool:
    """Whether a text with this key is held out: about 1 in 16, stable across runs and machines."""
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[0] == "0"


def clean(text: str) -> str:
    """One line: SumPubMed's ``<dig>`` placeholders removed, whitespace collapsed."""
    return " ".join(_DIG.sub(" ", text).split())


def sentences_of(text: str) -> list[str]:
    """A document cut after ``.``, ``!`` or ``?`` followed by a space."""
    return [s for s in _SENTENCE_END.split(text) if s]


def cut(text: str, max_words: int) -> str:
    """The first ``max_words`` words of ``text``."""
    return " ".join(text.split()[:max_words])


def read_documents(paths: list[str]) -> list[tuple[str, str]]:
    """(key, text) of every document, the title first where the text does not start with it."""
    documents = []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                try:
                    record = json.loads(line)
                    title, text = clean(record.get("title") or ""), clean(record["text"])
                except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
                    raise SplitsError(f"{path}:{number}: not a document record ({{\"id\", \"title\", \"text\"}})") \
                        from None
                if title and not text.startswith(title):
                    text = f"{title.rstrip('.')}. {text}"
                if text:
                    documents.append((f"{Path(path).name}:{record.get('id', number)}", text))
    return documents


def read_source_pairs(paths: list[str]) -> list[tuple[str, str, str]]:
    """(source, query, passage) of every ``query<TAB>passage`` pair (further tab fields ignored); the source is the
    file's name up to its first dot."""
    pairs = []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8") as f:
            for line in f:
                query, _, rest = line.rstrip("\n").partition("\t")
                passage = clean(rest.split("\t")[0])
                if query.strip() and passage:
                    pairs.append((Path(path).name.split(".")[0], clean(query), passage))
    return pairs


def _without(sentences: list[str], chosen: list[int]) -> list[tuple[str, str]]:
    """Each chosen sentence -> the document without it, where the sentence (the query) has 5+ words."""
    pairs = [(sentences[i], " ".join(sentences[:i] + sentences[i + 1:])) for i in chosen]
    return [(q, d) for q, d in pairs if len(q.split()) >= 5]


def pseudo_queries(text: str, rng: random.Random) -> list[tuple[str, str]]:
    """The first sentence -> the rest, and a middle sentence -> the document without it (documents of 4+
    sentences; the query has 5+ words)."""
    sentences = sentences_of(text)
    if len(sentences) < 4:
        return []
    return _without(sentences, [0, rng.randrange(1, len(sentences) - 1)])


def more_middles(text: str, taken: set[str], middles: int, rng: random.Random) -> list[tuple[str, str]]:
    """Up to ``middles`` further middle sentences of ``text`` other than those ``taken`` (the queries
    ``pseudo_queries`` gave), each -> the document without it (queries of 5+ words)."""
    sentences = sentences_of(text)
    if len(sentences) < 4 or middles < 1:
        return []
    free = [i for i in range(1, len(sentences) - 1) if sentences[i] not in taken]
    return _without(sentences, sorted(rng.sample(free, min(middles, len(free)))))


def split_lines(documents: list[tuple[str, str]], source_pairs: list[tuple[str, str, str]], max_words: int,
                sample: dict[str, int], seed: int = SEED, pseudo_middles: int = 1) -> dict[str, list[str]]:
    """Each output file's lines (see the module docstring)."""
    rng = random.Random(seed)
    extra_rng = random.Random(f"{seed}:middles")  # the further middles: the first draws' sequence untouched
    train_docs, pseudo, held_out, extra = [], [], [], []
    dev_by_source: dict[str, list[tuple[str, str]]] = {"pseudo": []}
    for key, text in documents:
        pairs = pseudo_queries(text, rng)
        if is_dev(key):
            dev_by_source["pseudo"] += pairs
            held_out += sentences_of(text)
        else:
            train_docs.append(cut(text, max_words))
            pseudo += [(q, cut(d, max_words)) for q, d in pairs]
            if pseudo_middles > 1:
                taken = {q for q, _ in pairs}
                extra += [(q, cut(d, max_words)) for q, d in more_middles(text, taken, pseudo_middles - 1, extra_rng)]
    pseudo += extra
    by_source: dict[str, list[tuple[str, str]]] = {}
    for source, query, passage in source_pairs:
        if is_dev(passage):
            dev_by_source.setdefault(source, []).append((query, passage))
            held_out += [query, *sentences_of(passage)]
        else:
            by_source.setdefault(source, []).append((query, cut(passage, max_words)))
    train_pairs = [pair for pairs in by_source.values() for pair in pairs]
    dev = [pair for pairs in dev_by_source.values() for pair in pairs]
    sampled = []
    for source, pairs in [*by_source.items(), ("pseudo", pseudo)]:
        sampled += rng.sample(pairs, min(len(pairs), sample.get(source, len(pairs))))
    tsv = lambda pairs: [f"{q}\t{d}" for q, d in pairs]  # noqa: E731
    return {"documents.txt.gz": train_docs, "pairs.tsv.gz": tsv(train_pairs), "pseudo.tsv.gz": tsv(pseudo),
            "retrieval.tsv.gz": tsv(sampled), "dev.tsv.gz": tsv(dev), "dev_sentences.txt.gz": sorted(set(held_out)),
            **{f"dev-{source}.tsv.gz": tsv(pairs) for source, pairs in dev_by_source.items()}}


def gzip_bytes(lines: list[str]) -> bytes:
    """A gzip file whose bytes depend on ``lines`` only (no name or time in its header)."""
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed, \
            io.TextIOWrapper(packed, encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
    return raw.getvalue()


def _identity(config: SplitsConfig, documents: list[str], pairs: list[str]) -> dict:
    return {"documents": [{"name": Path(p).name, "digest": content_digest(Path(p))} for p in documents],
            "pairs": [{"name": Path(p).name, "digest": content_digest(Path(p))} for p in pairs],
            "max_words": config.max_words, "sample": dict(sorted(config.sample.items())), "seed": SEED,
            **({"pseudo_middles": config.pseudo_middles} if config.pseudo_middles != 1 else {})}


def make_splits(config: SplitsConfig) -> dict[str, int]:
    """Write the split files into ``config.out`` unless its manifest says they were made from the same inputs;
    returns the lines per file. A folder holding other files of the same names (not written here) is refused, unless
    they equal what would be written (then it is adopted)."""
    documents, pairs = expand_sources(config.documents), expand_sources(config.pairs)
    if not documents and not pairs:
        raise SplitsError("[splits] names no documents and no pairs")
    out, identity = Path(config.out), _identity(config, documents, pairs)
    manifest = _read_manifest(out)
    if manifest is not None and manifest.get("identity") == identity and _outputs_intact(out, manifest):
        logger.info("splits: %s is current", out)
        return manifest["lines"]
    split = split_lines(read_documents(documents), read_source_pairs(pairs), config.max_words, config.sample,
                        pseudo_middles=config.pseudo_middles)
    contents = {name: gzip_bytes(lines) for name, lines in split.items()}
    if manifest is None:
        _check_foreign(out, contents)
    out.mkdir(parents=True, exist_ok=True)
    for name, data in contents.items():
        with atomic_file(out / name, overwrite=True) as tmp:
            tmp.write_bytes(data)
    lines = {name: len(items) for name, items in split.items()}
    record = {"identity": identity, "lines": lines,
              "outputs": {name: hashlib.sha256(data).hexdigest() for name, data in contents.items()}}
    with atomic_file(out / MANIFEST, overwrite=True) as tmp:
        tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    logger.info("splits: %s", ", ".join(f"{name} {n:,}" for name, n in lines.items()))
    return lines


def _read_manifest(out: Path) -> dict | None:
    path = out / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise SplitsError(f"{path}: not a splits manifest (damaged); remove the folder {out} to make it anew") from None
    if not isinstance(manifest, dict):
        raise SplitsError(f"{path}: not a splits manifest (damaged); remove the folder {out} to make it anew")
    return manifest


def _outputs_intact(out: Path, manifest: dict) -> bool:
    """Whether every file the manifest lists is there with its recorded SHA-256."""
    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict):
        return False
    for name, digest in outputs.items():
        path = out / str(name)
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            return False
    return True


def _check_foreign(out: Path, contents: dict[str, bytes]) -> None:
    """Refuse to replace files swembed did not write (no manifest) unless they hold exactly what would be written
    (a copy made by an earlier version: adopted)."""
    for name, data in contents.items():
        path = out / name
        if path.exists() and (not path.is_file() or path.read_bytes() != data):
            raise SplitsError(f"{path}: a file swembed did not write ([splits] out holds no {MANIFEST}); move it away "
                             "or set [splits] out to another folder")
