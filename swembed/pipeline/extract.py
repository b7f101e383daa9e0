"""Stage 3, extract: each word's vector is the mean, over up to N sentences containing it, of the
teacher's last-layer vectors at that word's sub-word positions (paper eq. 1).

* Sentences are chosen once, rarest words first, and each chosen sentence is credited to every
  vocabulary word it contains whose quota is not full: one teacher pass over the chosen sentences.
* Word spans come from the fast tokenizer's character offsets, so ``good`` is never credited with
  the first piece of ``goodness`` (the official code's prefix bug).
* Words with no context are encoded alone (the sentence is the word itself) and counted.
* The teacher's pooled embedding of every chosen sentence is kept for the distill stage.
* Work is done in units of sentences; the running sums are checkpointed after each unit, and a
  re-run resumes after the last completed unit with bit-identical results.

Artifact: ``vectors.npy`` (V, H) float32, ``context_counts.npy``, ``sentences.txt`` and
``teacher_embeddings.npy`` (the chosen sentences and their pooled teacher vectors).
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from swembed.pipeline.corpus import read_sentences
from swembed.pipeline.stage import StageResult, StageRun, run_stage
from swembed.pipeline.vocab import read_vocab
from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer

logger = logging.getLogger(__name__)
VECTORS_FILE = "vectors.npy"
CONTEXT_COUNTS_FILE = "context_counts.npy"
SENTENCES_FILE = "sentences.txt"
TEACHER_EMBEDDINGS_FILE = "teacher_embeddings.npy"
_STATE = "state.npz"


@dataclass
class ExtractConfig:
    sentences_per_word: int = 30
    batch_size: int = 64
    unit_sentences: int = 8192
    lowercase: bool = True
    seed: int = 0
    words: str = "pattern"  # or "teacher" (zh/ja: the teacher's tokens), "jieba" / "fugashi" (segmenters)


def word_splitter(config, tokenizer_json: str | None) -> WordTokenizer:
    """The vocabulary-less tokenizer whose ``spans``/``words`` split sentences for the vocab and extract stages."""
    from tokenizers import Tokenizer

    pieces = Tokenizer.from_str(tokenizer_json) if config.words == "teacher" else None
    return WordTokenizer({}, TokenizationRules(lowercase=config.lowercase, words=config.words, oov_backoff="none"),
                         pieces)


def choose_sentences(
    sentences: list[str], index: dict[str, int], counts: list[int], per_word: int, splitter: WordTokenizer, seed: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Pick sentences so that every word gets up to ``per_word`` contexts, rare words first.

    Sentences are visited in order of their rarest vocabulary word (ties in seeded random order); a
    sentence is chosen when it still fills some word's quota, and is credited to every such word.
    Returns the chosen sentence indices and, for each, the vocabulary ids it is credited to.
    """
    freq = np.asarray(counts, dtype=np.int64)
    sentence_words: list[np.ndarray] = []
    rarest = np.empty(len(sentences), dtype=np.int64)
    get = index.get
    for i, sentence in enumerate(sentences):
        ids = {get(w) for w, _, _ in splitter.spans(sentence)}
        ids.discard(None)
        arr = np.fromiter(ids, dtype=np.int64, count=len(ids))
        sentence_words.append(arr)
        rarest[i] = freq[arr].min() if len(arr) else np.iinfo(np.int64).max
    tiebreak = np.random.default_rng(seed).random(len(sentences))
    order = np.lexsort((tiebreak, rarest))
    need = np.full(len(counts), per_word, dtype=np.int64)
    chosen, credits = [], []
    for i in order:
        ids = sentence_words[i]
        if len(ids) == 0:
            continue
        open_ids = ids[need[ids] > 0]
        if len(open_ids):
            need[open_ids] -= 1
            chosen.append(i)
            credits.append(open_ids)
    return np.asarray(chosen, dtype=np.int64), credits


def occurrence_tokens(text: str, credited: set[int], index: dict[str, int], offsets: np.ndarray,
                      splitter: WordTokenizer) -> tuple[list[int], list[int], list[int]]:
    """For the first occurrence of each credited word in ``text``: (word id, occurrence #, token position).

    A token belongs to a word when its character span overlaps the word's span (special and prompt
    tokens carry -1 spans and never match).
    """
    spans, ids = [], []
    for word, start, end in splitter.spans(text):
        idx = index.get(word)
        if idx is not None and idx in credited:
            credited = credited - {idx}
            spans.append((start, end))
            ids.append(idx)
    if not ids:
        return [], [], []
    span_arr = np.asarray(spans, dtype=np.int64)
    starts, ends = offsets[:, 0], offsets[:, 1]
    overlap = (starts[None, :] < span_arr[:, 1:2]) & (ends[None, :] > span_arr[:, 0:1]) & (starts[None, :] >= 0)
    occ, tok = np.nonzero(overlap)
    return ids, occ.tolist(), tok.tolist()


class ContextAccumulator:
    """Running per-word sums of contextual vectors and context counts."""

    def __init__(self, vocab_size: int, dim: int, device: torch.device) -> None:
        self.sums = torch.zeros(vocab_size, dim, dtype=torch.float32, device=device)
        self.counts = np.zeros(vocab_size, dtype=np.int64)

    def add_batch(self, texts: list[str], credits: list[np.ndarray], output, index: dict[str, int],
                  splitter: WordTokenizer) -> None:
        hidden = output.hidden
        width = hidden.shape[1]
        occ_word: list[int] = []
        occ_of_token: list[int] = []
        token_flat: list[int] = []
        for row, text in enumerate(texts):
            ids, occ, tok = occurrence_tokens(text, set(credits[row].tolist()), index, output.offsets[row],
                                              splitter)
            base = len(occ_word)
            occ_word.extend(ids)
            occ_of_token.extend(base + o for o in occ)
            token_flat.extend(row * width + t for t in tok)
        if not token_flat:
            return
        device = hidden.device
        occ_t = torch.tensor(occ_of_token, device=device)
        flat = hidden.reshape(-1, hidden.shape[-1])[torch.tensor(token_flat, device=device)]
        occ_sums = torch.zeros(len(occ_word), flat.shape[1], device=device).index_add_(0, occ_t, flat)
        tokens_per_occ = torch.bincount(occ_t, minlength=len(occ_word))
        found = tokens_per_occ > 0
        occ_vecs = occ_sums[found] / tokens_per_occ[found, None]
        word_ids = torch.tensor(occ_word, device=device)[found]
        self.sums.index_add_(0, word_ids, occ_vecs)
        np.add.at(self.counts, word_ids.cpu().numpy(), 1)

    def save(self, path: Path, units_done: int) -> None:
        tmp = path.with_name(f".{path.name}.tmp.npz")
        np.savez(tmp, sums=self.sums.cpu().numpy(), counts=self.counts, units_done=units_done)
        os.replace(tmp, path)

    def load(self, path: Path) -> int:
        with np.load(path) as state:
            self.sums.copy_(torch.from_numpy(state["sums"]))
            self.counts[:] = state["counts"]
            return int(state["units_done"])


def embed_alone(teacher, words: list[str], batch_size: int) -> np.ndarray:
    """Vectors of words encoded on their own: the mean of the word's sub-word vectors."""
    out = np.zeros((len(words), teacher.dim), dtype=np.float32)
    for start in range(0, len(words), batch_size):
        batch = words[start : start + batch_size]
        result = teacher.forward(batch)
        for row in range(len(batch)):
            positions = np.nonzero(result.offsets[row][:, 0] >= 0)[0]
            if len(positions):
                out[start + row] = result.hidden[row, torch.from_numpy(positions)].mean(0).cpu().numpy()
    return out


def run_extract(config: ExtractConfig, corpus: StageResult, vocab: StageResult, teacher, work_dir: Path,
                force: bool = False, quiet: bool = False) -> StageResult:
    teacher_id = {k: v for k, v in teacher.describe().items() if k != "path"}
    identity = {**asdict(config), "teacher": teacher_id}
    if config.words == "pattern":  # the default before the option existed: keep earlier caches valid
        del identity["words"]

    def compute(run: StageRun) -> dict:
        from tqdm.auto import tqdm

        words, counts = read_vocab(vocab)
        index = {w: i for i, w in enumerate(words)}
        sentences = read_sentences(corpus)
        splitter = word_splitter(config, teacher.tokenizer_json())
        t0 = time.time()
        chosen, credits = choose_sentences(sentences, index, counts, config.sentences_per_word, splitter, config.seed)
        select_s = time.time() - t0
        # Batch by length: sort the chosen sentences by character length (stable, so deterministic).
        by_length = np.argsort([len(sentences[i]) for i in chosen], kind="stable")
        chosen = chosen[by_length]
        credits = [credits[i] for i in by_length]
        texts = [sentences[i] for i in chosen]
        del sentences
        acc = ContextAccumulator(len(words), teacher.dim, teacher.device)
        state_path = run.partial / _STATE
        units_done = acc.load(state_path) if state_path.is_file() else 0
        unit = config.unit_sentences
        n_units = (len(texts) + unit - 1) // unit
        if units_done:
            logger.info("extract: resuming after unit %d of %d", units_done, n_units)
        forward_s = 0.0
        t_start = time.time()
        bar = tqdm(total=len(texts), initial=min(units_done * unit, len(texts)), unit="sent", desc="extract",
                   disable=quiet, smoothing=0.05)
        for u in range(units_done, n_units):
            lo, hi = u * unit, min((u + 1) * unit, len(texts))
            pooled = np.zeros((hi - lo, teacher.pooled_dim), dtype=np.float32)
            for start in range(lo, hi, config.batch_size):
                stop = min(start + config.batch_size, hi)
                batch_texts = texts[start:stop]
                tf = time.time()
                output = teacher.forward(batch_texts)
                forward_s += time.time() - tf
                pooled[start - lo : stop - lo] = output.pooled
                acc.add_batch(batch_texts, credits[start:stop], output, index, splitter)
                bar.update(stop - start)
            np.save(run.partial / f"pooled-{u:06d}.npy", pooled)
            acc.save(state_path, u + 1)
            run.unit_done(u + 1)
        bar.close()
        loop_s = time.time() - t_start
        sums = acc.sums.cpu().numpy()
        ctx = acc.counts
        table = np.zeros_like(sums)
        seen = ctx > 0
        table[seen] = sums[seen] / ctx[seen, None]
        alone = np.nonzero(~seen)[0]
        if len(alone):
            table[alone] = embed_alone(teacher, [words[i] for i in alone], config.batch_size)
        np.save(run.out / VECTORS_FILE, table)
        np.save(run.out / CONTEXT_COUNTS_FILE, ctx)
        pooled_all = np.concatenate([np.load(run.partial / f"pooled-{u:06d}.npy") for u in range(n_units)]) \
            if n_units else np.zeros((0, teacher.pooled_dim), np.float32)
        np.save(run.out / TEACHER_EMBEDDINGS_FILE, pooled_all)
        with open(run.out / SENTENCES_FILE, "w", encoding="utf-8") as handle:
            handle.writelines(t + "\n" for t in texts)
        processed = len(texts) - min(units_done * unit, len(texts))
        return {
            "chosen_sentences": len(texts),
            "select_s": round(select_s, 2),
            "sentences_per_s": round(processed / loop_s, 1) if loop_s > 0 else None,
            "forward_s": round(forward_s, 2),
            "words_with_context": int(seen.sum()),
            "words_full_quota": int((ctx >= config.sentences_per_word).sum()),
            "mean_contexts": round(float(ctx.mean()), 2),
            "words_encoded_alone": int(len(alone)),
            "resumed_after_unit": units_done,
        }

    return run_stage("extract", work_dir, identity, [corpus, vocab], compute, force=force, quiet=quiet)


def read_extract(folder: Path) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(word vectors, chosen sentences, their pooled teacher embeddings) from an extract artifact folder."""
    with open(folder / SENTENCES_FILE, encoding="utf-8") as handle:
        sentences = handle.read().split("\n")[:-1]
    return np.load(folder / VECTORS_FILE), sentences, np.load(folder / TEACHER_EMBEDDINGS_FILE, mmap_mode="r")
