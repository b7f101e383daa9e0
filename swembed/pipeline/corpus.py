"""Stage 1, corpus: read sources, normalise Unicode, split sentences (blingfire), keep short ones, de-duplicate.

Streams: memory holds one 8-byte hash per kept sentence, never the corpus itself.
Artifact: ``sentences.txt``, one sentence per line.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.config import CorpusConfig
from swembed.pipeline.sources import (
    HELD_OUT_RULE,
    CorpusError,
    describe_source,
    expand_sources,
    held_out_keys,
    is_held_out,
    named_sources,
    read_source,
    source_key,
)
from swembed.pipeline.stage import StageContext, StageResult, StageRun
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import WORD_PATTERN, normalize_text

logger = logging.getLogger(__name__)
_SPACES = re.compile(r"\s+")
_WORDS = re.compile(WORD_PATTERN)


def word_count(sentence: str) -> int:
    """The words of ``sentence`` as ``min_words`` and ``max_words`` count them."""
    return len(_WORDS.findall(sentence))


def _dedup_key(sentence: str) -> int:
    digest = hashlib.blake2b(sentence.lower().encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class SentenceSplitter:
    """blingfire's ``text_to_sentences`` (the same call, the same answer, '' where it fails) writing into one
    output buffer that grows as needed, instead of allocating and zeroing a new one for every text (14% of the
    corpus stage's time went to that allocation): 1.6-1.9x the splitting speed (reports/build-levers.md)."""

    def __init__(self) -> None:
        from blingfire import blingfire

        self._library = blingfire  # the loaded C library: looked up once, not once a text
        self._buffer: Any = None

    def __call__(self, text: str) -> list[str]:
        data = text.encode("utf-8")
        capacity = 2 * len(data)  # what text_to_sentences allows
        if self._buffer is None or len(self._buffer) < capacity:
            self._buffer = ctypes.create_string_buffer(max(capacity, 1 << 16))
        written = self._library.TextToSentences(ctypes.c_char_p(data), ctypes.c_int(len(data)),
                                                ctypes.byref(self._buffer), ctypes.c_int(capacity))
        if written == -1 or written > capacity:
            return [""]
        return ctypes.string_at(self._buffer, written).partition(b"\0")[0].decode("utf-8").split("\n")


def _sentences(spec: str, config: CorpusConfig, normalization: str, stats: dict) -> Iterator[str]:
    """The non-empty sentences of one source, normalised; counts its units and sentences in ``stats``."""
    split = SentenceSplitter() if config.split_sentences else lambda unit: [unit]
    for unit in read_source(spec, config.text_column):
        unit = _SPACES.sub(" ", normalize_text(unit, normalization)).strip()
        if not unit:
            continue
        stats["units"] += 1
        for sentence in split(unit):
            sentence = sentence.strip()
            if sentence:
                stats["sentences"] += 1
                yield sentence


def _fate(sentence: str, config: CorpusConfig, held_out: AbstractSet[str], seen: set[int]) -> str:
    """``"kept"`` (its key joins ``seen``), or the statistic that counts why ``sentence`` is left out."""
    n_words = word_count(sentence)
    if n_words < config.min_words:
        return "too_short"
    if n_words > config.max_words:
        return "too_long"
    if is_held_out(sentence, held_out):
        return "held_out"
    key = _dedup_key(sentence)
    if key in seen:
        return "duplicates"
    seen.add(key)
    return "kept"


def write_sentences(config: CorpusConfig, normalization: str, sources: list[str], out: Path,
                    held_out: AbstractSet[str] = frozenset()) -> dict:
    """Stream every source into ``out``, leaving out sentences whose ``loose_key`` is ``held_out``; return
    counts of what was kept and dropped and why."""
    seen: set[int] = set()
    stats: dict[str, Any] = {"units": 0, "sentences": 0, "kept": 0,
                             "too_short": 0, "too_long": 0, "duplicates": 0, "held_out": 0}
    per_source: dict[str, int] = {}
    full = lambda: bool(config.max_sentences) and stats["kept"] >= config.max_sentences  # noqa: E731
    with open(out, "w", encoding="utf-8") as sink:
        for spec in sources:
            kept_before = stats["kept"]
            for sentence in _sentences(spec, config, normalization, stats):
                fate = _fate(sentence, config, held_out, seen)
                stats[fate] += 1
                if fate == "kept":
                    sink.write(sentence + "\n")
                    if full():
                        break
            per_source[spec] = stats["kept"] - kept_before
            if full():
                break
    stats["per_source"] = per_source
    return stats


def run_corpus(ctx: StageContext, config: CorpusConfig, normalization: str,
               exclude: Sequence[str] = ()) -> StageResult:
    """Stage 1 over ``config.sources``; ``normalization`` is the tokenisation rules' Unicode form. No sentence
    repeats a text of the ``exclude`` sources (the evaluation sets: ``held_out_keys``)."""
    if not config.sources:
        raise CorpusError("no corpus given")
    sources = expand_sources(config.sources)
    identity = {**stage_key(config), "normalization": normalization,
                "sources": [describe_source(f) for f in sources]}
    if exclude:  # absent when empty, so the caches of builds without exclusions stay valid
        identity["exclude"] = [describe_source(f) for f in expand_sources(list(exclude))]
        identity |= HELD_OUT_RULE

    def compute(run: StageRun) -> dict:
        stats = write_sentences(config, normalization, sources, run.out / files.SENTENCES, held_out_keys(list(exclude)))
        if stats["kept"] == 0:
            raise CorpusError(
                f"the corpus gave no usable sentence ({stats['sentences']} sentences read; "
                f"{stats['too_short']} shorter than {config.min_words} words, {stats['too_long']} longer than "
                f"{config.max_words})"
            )
        return stats

    return ctx.run("corpus", identity, [], compute)


def source_lines(corpus: StageResult, patterns: list[str], where: str) -> np.ndarray:
    """The line numbers of ``corpus``'s artifact that came from the corpus sources ``patterns`` name
    (``named_sources``; ``where``: the setting, for its error), read from its per-source counts."""
    per_source = corpus.stats.get("per_source")
    if per_source is None or sum(per_source.values()) != corpus.stats.get("kept"):
        raise CorpusError(f"{where}: the corpus artifact {corpus.path} does not record its sentences per source "
                          "(made by an older swembed, or a source listed twice); rebuild it with --force")
    named = named_sources(patterns, [spec for spec in per_source if spec], where)
    starts = np.cumsum([0, *per_source.values()])
    return np.concatenate([np.arange(starts[i], starts[i + 1]) for i, spec in enumerate(per_source)
                           if source_key(spec) in named] or [np.zeros(0, dtype=np.int64)])


def rows_from_sources(corpus: StageResult, sentences: list[str], patterns: list[str], where: str) -> np.ndarray:
    """The indices of ``sentences`` (lines of ``corpus``'s artifact, e.g. those the teacher encoded) that came from
    the corpus sources ``patterns`` name (``source_lines``)."""
    lines = files.read_lines(corpus.path / files.SENTENCES)
    chosen = {lines[i] for i in source_lines(corpus, patterns, where)}
    return np.flatnonzero([sentence in chosen for sentence in sentences])
