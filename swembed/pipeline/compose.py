"""Stage 4, compose: the table in teacher space, from each language's extract artifact.

* **Vocabulary cut**: a corpus word seen in fewer than ``min_contexts`` sentences gets no row of its own; at
  inference (and in distillation, which uses the inference tokeniser) its pieces stand in for it.
* **Piece rows**: the teacher's tokens with their corpus mean vectors (shared by all languages, sums pooled),
  continuation pieces included, so that any unknown word composes from trained pieces.
* **Merged languages** (``merge_languages``): languages with the same tokenisation rules share one block of
  rows, a surface form they share one row, so a text needs no language to be encoded (and exports behave the same).
* **Piece prior**: a word seen in n sentences gets ``(n v_ctx + k v_pieces) / (n + k)``, where ``v_pieces`` is
  the mean of its pieces' vectors: a word with one noisy context leans on its composition, a frequent word keeps
  its own mean (k = ``piece_prior``; 0 turns it off). The post-training ``[shrinkage]`` stage does the same with
  the trained pieces (``swembed.pipeline.shrinkage``).

Rows: each language's words in vocabulary order, then the pieces. Artifact: ``table.npy`` (rows, H),
``rows.txt`` (each row's word or teacher token), ``piece_ids.npy`` (teacher token id of each piece row),
``word_contexts.npy`` (contexts of each word row); the layout (row ranges per language and of the pieces) is in
the manifest's stats.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.config import ComposeConfig
from swembed.pipeline.extract import Extracted
from swembed.pipeline.stage import StageContext, StageResult, StageRun
from swembed.pipeline.vocab import read_vocab_stage
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer

LAYOUT = "layout.json"


@dataclass
class Layout:
    """Which rows of a composed table are which: per language a [start, end) range of word rows, then pieces."""

    languages: dict[str, list[int]]
    pieces: list[int]
    labels: list[str]
    piece_ids: np.ndarray

    @classmethod
    def read(cls, folder: Path) -> Layout:
        spans = json.loads((folder / LAYOUT).read_text())
        return cls(spans["languages"], spans["pieces"], files.read_lines(folder / files.ROWS),
                   np.load(folder / files.PIECE_IDS))

    def tokenizers(self, rules: dict[str, TokenizationRules], subword) -> dict[str, WordTokenizer]:
        """Each language's inference tokeniser over its rows of the table (and the shared piece rows)."""
        piece_rows = {int(token): self.pieces[0] + i for i, token in enumerate(self.piece_ids)}
        return {lang: WordTokenizer({self.labels[i]: i for i in range(start, end)}, rules[lang], subword, piece_rows)
                for lang, (start, end) in self.languages.items()}


def pooled_pieces(extracts: list[Extracted]) -> tuple[np.ndarray, np.ndarray]:
    """Piece vectors and counts over all languages (each language's means weighted by its counts)."""
    counts = cast(np.ndarray, sum(e.piece_contexts for e in extracts))  # arrays: extracts is never empty
    sums = cast(np.ndarray, sum(e.piece_vectors * e.piece_contexts[:, None] for e in extracts))
    vectors = np.zeros_like(sums)
    seen = counts > 0
    vectors[seen] = sums[seen] / counts[seen, None]
    return vectors.astype(np.float32), counts


def piece_composition(words: list[str], splitter: WordTokenizer, piece_vectors: np.ndarray,
                      piece_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each word, the mean vector of its seen pieces and whether it has any."""
    out = np.zeros((len(words), piece_vectors.shape[1]), dtype=np.float32)
    found = np.zeros(len(words), dtype=bool)
    for i, word in enumerate(words):
        pieces = [p for p in splitter.word_pieces(word) if piece_counts[p] > 0]
        if pieces:
            out[i] = piece_vectors[pieces].mean(0)
            found[i] = True
    return out, found


def blend_by_contexts(vectors: np.ndarray, composed: np.ndarray, contexts: np.ndarray, k: float,
                      rows: np.ndarray) -> int:
    """A prior weighted against context counts, in place: each row in the mask ``rows`` of a word seen in
    n = ``contexts`` > 0 sentences becomes ``(n v + k composed) / (n + k)``; returns how many rows moved."""
    rows = rows & (contexts > 0)
    n = contexts[rows].astype(np.float32)[:, None]
    vectors[rows] = (n * vectors[rows] + k * composed[rows]) / (n + k)
    return int(rows.sum())


def merge_blocks(blocks: list[tuple[list[str], np.ndarray, np.ndarray]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """One block of (words, vectors, contexts) from several languages': a surface form they share gets the
    context-weighted mean of its vectors (the plain mean where none has contexts)."""
    if len(blocks) == 1:
        return blocks[0]
    index: dict[str, int] = {}
    for words, _, _ in blocks:
        for word in words:
            index.setdefault(word, len(index))
    sums = np.zeros((len(index), blocks[0][1].shape[1]))
    weights, contexts = np.zeros(len(index)), np.zeros(len(index), dtype=np.int64)
    for words, vectors, counts in blocks:
        rows = np.array([index[w] for w in words], dtype=np.int64)
        weight = np.maximum(counts, 0) + (counts == 0) * 1e-6  # words encoded alone count a little
        np.add.at(sums, rows, vectors * weight[:, None])
        np.add.at(weights, rows, weight)
        np.add.at(contexts, rows, counts)
    return list(index), (sums / weights[:, None]).astype(np.float32), contexts


def language_rows(config: ComposeConfig, rules: TokenizationRules, words: list[str], extracted: Extracted, subword,
                  piece_vectors: np.ndarray, piece_counts: np.ndarray
                  ) -> tuple[tuple[list[str], np.ndarray, np.ndarray], dict[str, int]]:
    """One language's word rows: (words, vectors, contexts) of the words kept by the vocabulary cut, with the piece
    prior applied, and their stats."""
    contexts = extracted.word_contexts
    # words encoded alone (teacher words the corpus lacks) have 0 contexts and always keep their row
    keep = (contexts >= config.min_contexts) | (contexts == 0)
    if not config.pieces or rules.oov_backoff != "pieces":
        keep[:] = True
    vectors = extracted.word_vectors.copy()
    shrunk = 0
    if config.piece_prior > 0 and config.pieces and rules.oov_backoff == "pieces":
        splitter = WordTokenizer({}, rules, subword)
        composed, found = piece_composition(words, splitter, piece_vectors, piece_counts)
        shrunk = blend_by_contexts(vectors, composed, contexts, config.piece_prior, found & keep)
    stats = {"word_rows": int(keep.sum()), "cut_words": int((~keep).sum()), "shrunk_words": shrunk}
    return ([w for w, k in zip(words, keep) if k], vectors[keep], contexts[keep]), stats


def piece_rows(subword, piece_counts: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The teacher tokens that get a piece row (seen in the corpus, neither special nor blank) and their labels."""
    special = {t.content for t in subword.get_added_tokens_decoder().values() if t.special}
    tokens = {i: t for t, i in subword.get_vocab(with_added_tokens=True).items()}
    piece_ids = np.array([i for i in np.flatnonzero(piece_counts > 0)
                          if tokens.get(int(i)) not in special and tokens.get(int(i), "").strip()], dtype=np.int64)
    return piece_ids, [tokens[int(i)] for i in piece_ids]


def run_compose(ctx: StageContext, config: ComposeConfig,
                languages: dict[str, tuple[TokenizationRules, StageResult, StageResult]], tokenizer_json: str
                ) -> StageResult:
    """``languages``: language -> (its rules, its vocab stage, its extract stage)."""
    # piece_prior is "shrinkage" in the key, the name this stage's cache has always had (its key_name)
    identity = {**stage_key(config), "rules": {lang: r.to_dict() for lang, (r, _, _) in languages.items()}}
    inputs = [stage for _, vocab, extract in languages.values() for stage in (vocab, extract)]

    def compute(run: StageRun) -> dict:
        from tokenizers import Tokenizer

        subword = Tokenizer.from_str(tokenizer_json)
        extracts = {lang: Extracted.read(extract.path) for lang, (_, _, extract) in languages.items()}
        piece_vectors, piece_counts = pooled_pieces(list(extracts.values()))
        labels: list[str] = []
        blocks, spans, stats, row_contexts, kept = [], {}, {}, [], {}
        for lang, (rules, vocab, _) in languages.items():
            kept[lang], stats[lang] = language_rows(config, rules, read_vocab_stage(vocab)[0], extracts[lang],
                                                    subword, piece_vectors, piece_counts)
        groups: dict[str, list[str]] = {}
        for lang, (rules, _, _) in languages.items():  # languages merged into one block share their rules
            groups.setdefault(json.dumps(rules.to_dict()) if config.merge_languages else lang, []).append(lang)
        for members in groups.values():
            words, vectors, contexts = merge_blocks([kept[lang] for lang in members])
            start = len(labels)
            blocks.append(vectors)
            row_contexts.append(contexts)
            labels += words
            spans.update({lang: [start, start + len(words)] for lang in members})
        word_rows = len(labels)
        piece_ids = np.zeros(0, dtype=np.int64)
        if config.pieces and any(r.oov_backoff == "pieces" for r, _, _ in languages.values()):
            piece_ids, piece_labels = piece_rows(subword, piece_counts)
            blocks.append(piece_vectors[piece_ids])
            labels += piece_labels
        layout = {"languages": spans, "pieces": [word_rows, word_rows + len(piece_ids)]}
        np.save(run.out / files.TABLE, np.concatenate(blocks).astype(np.float32))
        files.write_lines(run.out / files.ROWS, labels)
        np.save(run.out / files.PIECE_IDS, piece_ids)
        np.save(run.out / files.WORD_CONTEXTS, np.concatenate(row_contexts))
        (run.out / LAYOUT).write_text(json.dumps(layout))
        return {**layout, "languages_stats": stats, "piece_rows": int(len(piece_ids))}

    return ctx.run("compose", identity, inputs, compute)
