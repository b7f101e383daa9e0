"""Stage 3, extract: one teacher pass over the chosen sentences gives three things (paper eq. 1 and 3.3).

* **Word vectors**: a word's vector is the mean, over the sentences containing it, of the teacher's
  last-layer vectors at that word's sub-word positions. Word spans come from the fast tokenizer's
  character offsets, so ``good`` is never credited with the first piece of ``goodness`` (the official
  code's prefix bug). Words with no context are encoded alone (the sentence is the word itself).
* **Piece vectors**: every teacher token's mean vector over all its occurrences, continuation pieces
  included: the rows that unknown words back off to.
* **Distillation targets**: the teacher's pooled embedding of every encoded sentence.

Sentences: ``all`` encodes every corpus sentence (each word credited with every sentence it occurs in),
``quota`` picks sentences once, rarest words first, until each word has N (the paper's cheaper choice for
slow teachers); ``cover`` picks the same sentences but credits every word in them, as ``all`` does (a word
gets at least its N contexts, frequent words many more), so a build reads what adds contexts to words still
short of them instead of every sentence. They are sorted by token length and cut into batches of at most
``batch_tokens`` padded tokens. Workers tokenise the next batches and build their index arrays (token -> word
occurrence -> word, token -> piece) while the device runs the current one: forked processes beside a CUDA device
(a GPU outruns one Python thread), one background thread on a CPU (whose cores run the teacher). The running sums
stay on the device and leave it only at checkpoints. Checkpoints (at most every ``checkpoint_seconds``, at unit ends)
let a killed run resume after its last checkpoint with bit-identical results.
"""
from __future__ import annotations

import atexit
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from swembed.pipeline import files
from swembed.pipeline.config import QUOTA_CHOICES, ExtractConfig
from swembed.pipeline.corpus import source_lines, word_count
from swembed.pipeline.stage import StageContext, StageResult, StageRun, load_checkpoint, teacher_identity
from swembed.pipeline.vocab import read_vocab_stage
from swembed.runtime.outputs import atomic_file
from swembed.runtime.settings import stage_key
from swembed.runtime.testpoints import reached
from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer, word_splitter
from swembed.teachers.base import Pinnable, pinned, token_budget_batches

logger = logging.getLogger(__name__)
_STATE = "state.npz"


def choose_sentences(sentences: list[str], index: dict[str, int], counts: list[int], per_word: int,
                     splitter: WordTokenizer, seed: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """``quota`` mode: pick sentences so that every word gets up to ``per_word`` contexts, rare words first.

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


def fill_to_budget(chosen: np.ndarray, sentences: list[str], budget: int, seed: int,
                   max_words: int | None = None, fill_from: np.ndarray | None = None) -> np.ndarray:
    """``budget`` sentences: the first of ``chosen`` (in its priority order) when it holds more, else all of it
    plus a seeded random sample of the other sentences (of at most ``max_words`` words, counted as the corpus
    stage counts them, when given: short sentences are the teacher's cheapest distillation targets; among the
    rows ``fill_from`` when given: some corpus sources only)."""
    if budget <= len(chosen):
        return chosen[:budget]
    rest = np.setdiff1d(np.arange(len(sentences)) if fill_from is None else fill_from, chosen)
    if max_words:
        rest = rest[np.fromiter((word_count(sentences[i]) <= max_words for i in rest), dtype=bool, count=len(rest))]
    extra = np.random.default_rng([seed, 1]).permutation(rest)[: budget - len(chosen)]
    return np.concatenate([chosen, extra])


class Chosen(NamedTuple):
    """What ``select_sentences`` picks: corpus rows, the quota's credits (``quota`` mode only) and, with
    ``[extract] window``, the window of each quota-chosen row that the teacher reads instead of the whole sentence."""

    rows: np.ndarray
    credits: list[np.ndarray] | None
    windows: dict[int, str]


def window_of(sentence: str, credited: np.ndarray, splitter: WordTokenizer, index: dict[str, int],
              width: int) -> str:
    """The part of ``sentence`` from ``width`` words before its first credited word to ``width`` words after its
    last (the whole sentence when that reaches both ends): the context the quota chose the sentence for."""
    spans = splitter.spans(sentence)
    wanted = set(credited.tolist())
    at = [k for k, (word, _, _) in enumerate(spans) if index.get(word) in wanted]
    if not at:
        return sentence
    first, last = max(0, at[0] - width), min(len(spans) - 1, at[-1] + width)
    if first == 0 and last == len(spans) - 1:
        return sentence
    return sentence[spans[first][1] : spans[last][2]]


def select_sentences(config: ExtractConfig, sentences: list[str], index: dict[str, int], counts: list[int],
                     splitter: WordTokenizer, seed: int, fill_from: np.ndarray | None = None) -> Chosen:
    """The sentences extraction encodes: the quota's choice (with its credits; ``cover``: in corpus order, no
    credits, and with ``max_sentences`` cut or filled to that budget, from the rows ``fill_from`` when given), or
    every sentence (a seeded sample of ``max_sentences`` when set; no credits). With ``window``, each quota-chosen
    sentence (not the fill) is read as the window around the words it was chosen for (``window_of``)."""
    if config.sentences in QUOTA_CHOICES:
        chosen, credits = choose_sentences(sentences, index, counts, config.sentences_per_word, splitter, seed)
        windows = {}
        if config.window:
            windows = {int(row): window_of(sentences[row], credited, splitter, index, config.window)
                       for row, credited in zip(chosen, credits)}
        if config.sentences == "quota":
            return Chosen(chosen, credits, windows)
        if config.max_sentences:
            chosen = fill_to_budget(chosen, sentences, config.max_sentences, seed, config.fill_max_words, fill_from)
        return Chosen(np.sort(chosen), None, windows)
    if config.max_sentences and config.max_sentences < len(sentences):
        return Chosen(np.sort(np.random.default_rng(seed).permutation(len(sentences))[: config.max_sentences]), None,
                      {})
    return Chosen(np.arange(len(sentences)), None, {})


@dataclass
class Selection:
    """What one language's extraction encodes: the chosen texts with their credits (quota mode), token lengths
    (special tokens included) and length-sorted batches of at most ``batch_tokens`` padded tokens. Made once per
    build and read by both the plan and the extract stage."""

    texts: list[str]
    credits: list[set[int]] | None
    lengths: np.ndarray
    batches: list[np.ndarray]
    corpus_sentences: int
    select_s: float

    @classmethod
    def make(cls, config: ExtractConfig, rules: TokenizationRules, corpus: StageResult, vocab: StageResult, teacher,
             seed: int) -> Selection:
        start = time.time()
        words, counts = read_vocab_stage(vocab)
        sentences = files.read_lines(corpus.path / files.SENTENCES)
        splitter = word_splitter(rules, teacher.tokenizer_json())
        fill_from = source_lines(corpus, config.fill_sources, "[extract] fill_sources") if config.fill_sources else None
        chosen, credit_arrays, windows = select_sentences(config, sentences, {w: i for i, w in enumerate(words)},
                                                          counts, splitter, seed, fill_from)
        texts = [windows.get(int(i), sentences[i]) for i in chosen]
        lengths = teacher.token_lengths(texts) + 2
        return cls(texts, None if credit_arrays is None else [set(c.tolist()) for c in credit_arrays], lengths,
                   token_budget_batches(lengths, teacher.batch_tokens), len(sentences), time.time() - start)

    def padded_sizes(self, batches: list[np.ndarray] | None = None) -> np.ndarray:
        """Padded tokens of each of ``batches`` (rows of the texts; default: the selection's own batches)."""
        batches = self.batches if batches is None else batches
        return np.array([len(rows) * int(self.lengths[rows].max()) for rows in batches], dtype=np.int64)

    @property
    def padded_tokens(self) -> int:
        """Tokens the teacher runs, padding included."""
        return int(self.padded_sizes().sum())


def extract_identity(config: ExtractConfig, rules: TokenizationRules, teacher, seed: int) -> dict:
    """What an extract artifact depends on besides its corpus and vocab (checkpoint granularity does not count).

    The seed reaches only a sampled selection (the quota's tie-break, ``max_sentences``): an extract of every
    sentence is the same for every seed, so it is recorded as seed 0 and builds that differ in seed share it."""
    sampled = config.sentences in QUOTA_CHOICES or bool(config.max_sentences)
    identity = {**stage_key(config), "rules": rules.splitting_only().to_dict(), "seed": seed if sampled else 0,
                **teacher_identity(teacher),
                "batch_tokens": teacher.batch_tokens}  # what ran: unset means by device (pick_batch_tokens)
    if identity["teacher"].get("prompt"):  # since 2026-11-26 a token holding the prompt's last space (XLM-R's and
        identity["first_token"] = "credited"  # Gemma's '▁A') is the text's: extracts made before are not reused
    return identity


@dataclass
class BatchIndex(Pinnable):
    """Where a batch's token vectors go, built on the CPU from the tokenised batch alone.

    ``word_pos``/``word_id``/``word_weight``: flat token positions (row * width + t) of credited word
    occurrences, the word each belongs to, and 1 / (tokens of that occurrence), so that one weighted
    ``index_add`` sums each occurrence's mean vector into its word; ``occurrence_words``: one entry per
    credited occurrence. ``piece_pos``/``piece_id``: every text token's position and teacher token id.
    """

    word_pos: torch.Tensor
    word_id: torch.Tensor
    word_weight: torch.Tensor
    occurrence_words: torch.Tensor
    piece_pos: torch.Tensor
    piece_id: torch.Tensor

    def to(self, device: torch.device) -> BatchIndex:
        return BatchIndex(*(getattr(self, f).to(device, non_blocking=True) for f in self.__dataclass_fields__))


def batch_index(texts: list[str], inputs, index: dict[str, int], splitter: WordTokenizer,
                credits: list[set[int]] | None) -> BatchIndex:
    """The index arrays of one tokenised batch: each credited word's first occurrence in each text (all vocabulary
    words when ``credits`` is None) matched to the tokens that overlap its span, all texts at once."""
    ids = np.asarray(inputs.ids)
    width = ids.shape[1]
    offsets = np.stack(inputs.offsets)  # (B, T, 2)
    span = max((len(t) for t in texts), default=0) + 2  # texts laid end to end in one coordinate system
    starts, ends, words = [], [], []
    for row, text in enumerate(texts):
        allowed = credits[row] if credits is not None else None
        seen: set[int] = set()
        base = row * span
        for word, start, end in splitter.spans(text):
            idx = index.get(word)
            if idx is None or idx in seen or (allowed is not None and idx not in allowed):
                continue
            seen.add(idx)
            starts.append(base + start)
            ends.append(base + end)
            words.append(idx)
    text_token = offsets[..., 0] >= 0
    rows, cols = np.nonzero(text_token)
    token_start = offsets[rows, cols, 0] + rows * span
    token_end = offsets[rows, cols, 1] + rows * span
    position = rows * width + cols
    occ_start, occ_end = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    occurrence = np.searchsorted(occ_end, token_start, side="right")  # first occurrence ending after the start
    inside = occurrence < len(occ_end)
    inside[inside] = occ_start[occurrence[inside]] < token_end[inside]
    occurrence = occurrence[inside]
    tokens_per_occurrence = np.bincount(occurrence, minlength=len(words))
    word_ids = np.asarray(words, dtype=np.int64)
    as_tensor = torch.from_numpy
    return BatchIndex(
        word_pos=as_tensor(position[inside]),
        word_id=as_tensor(word_ids[occurrence]),
        word_weight=as_tensor((1.0 / tokens_per_occurrence[occurrence]).astype(np.float32)),
        occurrence_words=as_tensor(word_ids[tokens_per_occurrence > 0]),
        piece_pos=as_tensor(position),
        piece_id=as_tensor(ids[rows, cols]),
    )


class Accumulator:
    """Running sums and context counts of word and piece vectors, on the teacher's device."""

    def __init__(self, n_words: int, n_pieces: int, dim: int, device: torch.device) -> None:
        zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float32, device=device)  # noqa: E731
        self.word_sums, self.word_counts = zeros(n_words, dim), zeros(n_words)
        self.piece_sums, self.piece_counts = zeros(n_pieces, dim), zeros(n_pieces)

    def add(self, hidden: torch.Tensor, where: BatchIndex) -> None:
        flat = hidden.reshape(-1, hidden.shape[-1])
        self.word_sums.index_add_(0, where.word_id, flat[where.word_pos] * where.word_weight[:, None])
        self.word_counts.index_add_(0, where.occurrence_words, torch.ones_like(where.occurrence_words,
                                                                                dtype=torch.float32))
        self.piece_sums.index_add_(0, where.piece_id, flat[where.piece_pos])
        self.piece_counts.index_add_(0, where.piece_id, torch.ones_like(where.piece_id, dtype=torch.float32))

    def state(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name).cpu().numpy()
                for name in ("word_sums", "word_counts", "piece_sums", "piece_counts")}

    @property
    def shape(self) -> list[int]:
        """[words, pieces, dimensions]: what a checkpoint's rows must fit."""
        return [len(self.word_sums), len(self.piece_sums), self.word_sums.shape[1]]

    def save(self, path: Path, units_done: int) -> None:
        """The sums and counts of the rows touched so far (early in a build, a small part of the teacher's piece
        vocabulary), with the full shapes they belong to."""
        rows = {}
        for kind in ("word", "piece"):
            sums, counts = getattr(self, f"{kind}_sums"), getattr(self, f"{kind}_counts")
            touched = torch.nonzero((counts != 0) | (sums != 0).any(dim=1)).flatten()
            rows.update({f"{kind}_rows": touched.cpu().numpy(), f"{kind}_sums": sums[touched].cpu().numpy(),
                         f"{kind}_counts": counts[touched].cpu().numpy()})
        with atomic_file(path, checked=False) as tmp, open(tmp, "wb") as handle:  # no half file, even on SIGTERM
            np.savez(handle, units_done=units_done, shape=np.array(self.shape), **rows)

    def load(self, path: Path) -> int:
        """The units a checkpoint holds, its sums copied in; all of it read and checked before anything is
        copied (a damaged file raises, leaving the sums as they were)."""
        with np.load(path) as state:
            arrays = {name: state[name] for name in state.files}
        if "shape" not in arrays and "word_sums" in arrays:  # every row, as checkpoints were written up to 77cf7e1
            arrays.update({f"{kind}_rows": np.arange(len(arrays[f"{kind}_sums"])) for kind in ("word", "piece")},
                          shape=np.array([len(arrays["word_sums"]), len(arrays["piece_sums"]),
                                          arrays["word_sums"].shape[-1]]))
        shape = self.shape
        if arrays["shape"].tolist() != shape:
            raise ValueError("its sums are not of this vocabulary's shapes")
        for kind, n in (("word", shape[0]), ("piece", shape[1])):
            rows = arrays[f"{kind}_rows"]
            if (len(rows) and not 0 <= rows.min() <= rows.max() < n) or arrays[f"{kind}_sums"].shape != (
                    len(rows), shape[2]) or arrays[f"{kind}_counts"].shape != (len(rows),):
                raise ValueError(f"its {kind} rows do not fit this vocabulary")
        for kind in ("word", "piece"):
            rows = torch.from_numpy(arrays[f"{kind}_rows"]).to(self.word_sums.device)
            for part in ("sums", "counts"):
                target = getattr(self, f"{kind}_{part}")
                target.zero_()
                target[rows] = torch.from_numpy(arrays[f"{kind}_{part}"]).to(target.device)
        return int(arrays["units_done"])


def means(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    out = np.zeros_like(sums)
    seen = counts > 0
    out[seen] = sums[seen] / counts[seen, None]
    return out


def embed_alone(teacher, words: list[str]) -> np.ndarray:
    """Vectors of words encoded on their own: the mean of the word's sub-word vectors."""
    out = np.zeros((len(words), teacher.dim), dtype=np.float32)
    for rows in token_budget_batches(np.full(len(words), 8), 4096):
        result = teacher.forward([words[i] for i in rows])
        for k, i in enumerate(rows):
            positions = np.nonzero(result.offsets[k][:, 0] >= 0)[0]
            if len(positions):
                out[i] = result.hidden[k, torch.from_numpy(positions)].mean(0).cpu().numpy()
    return out


def prefetch_workers(device) -> int:
    """Processes that prepare batches: beside a CUDA device all cores but two (at most 8), on a CPU none (one
    background thread; the cores run the teacher)."""
    spare = (os.cpu_count() or 1) - 2
    return min(8, spare) if device.type == "cuda" and spare >= 2 else 0


class _Prefetcher:
    """``make(b)`` for each batch b in order (a subclass's ``_items``), computed ahead of the consumer; ``wait_s``:
    the time the consumer waited for them."""

    wait_s = 0.0

    def __iter__(self):
        items = self._items()
        while True:
            start = time.perf_counter()
            item = next(items, None)
            self.wait_s += time.perf_counter() - start
            if item is None:
                return
            yield item


class ThreadPrefetcher(_Prefetcher):
    """Batches made in one background thread (beside a CPU teacher, which has the cores); pinned when ``pin``."""

    def __init__(self, make, batches, depth: int = 3, pin: bool = False) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        threading.Thread(target=self._run, args=(make, batches, pin), daemon=True).start()

    def _run(self, make, batches, pin: bool) -> None:
        try:
            for batch in batches:
                item = make(batch)
                self._queue.put(tuple(pinned(x, pin) for x in item))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consuming thread
            self._queue.put(exc)
        self._queue.put(None)

    def _items(self):
        while (item := self._queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item


class WorkerPrefetcher(_Prefetcher):
    """Batches made in ``workers`` forked processes (``torch.utils.data.DataLoader``); pinned when ``pin``."""

    def __init__(self, make, batches, workers: int, depth: int = 3, pin: bool = False) -> None:
        from torch.utils.data import DataLoader

        calls: Any = _Calls(make, list(batches))  # a map-style dataset (DataLoader's stubs want a Dataset)
        self._source = DataLoader(calls, batch_size=None, num_workers=workers,
                                  prefetch_factor=depth, collate_fn=_unchanged, pin_memory=pin,
                                  multiprocessing_context="fork")

    def _items(self):
        with _tokenizers_serial():  # forked workers tokenise one text at a time, silently
            items = iter(self._source)
        yield from items


class _Calls:
    """``make`` over a list of arguments, as a map-style dataset."""

    def __init__(self, make, args: list) -> None:
        self.make, self.args = make, args

    def __len__(self) -> int:
        return len(self.args)

    def __getitem__(self, i: int):
        return self.make(self.args[i])


def _unchanged(item):
    return item


@contextmanager
def _tokenizers_serial():
    """Forked children of a process whose tokenizers ran in parallel would warn and fall back to one thread."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM")
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


SIGNAL_POLL_S = 0.2  # how soon a signal caught by another thread reaches the main thread's handler


def interruptible(run: Callable[..., Any], *args: Any) -> Any:
    """``run(*args)`` in a daemon thread, waited for where a signal can interrupt the wait. A teacher forward is one
    long C call (a minute and more for a large batch on a loaded CPU), during which Python runs no signal handler:
    so SIGTERM and Ctrl-C would wait for it. Here they unwind the build at once (the stage resumes from its last
    checkpoint), and the abandoned forward ends with the process."""
    result: list = []
    done = threading.Event()  # not thread.is_alive(): an interrupted join() marks a running thread stopped (3.11)

    def target() -> None:
        try:
            with torch.inference_mode():
                result.append(run(*args))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the waiting thread
            result.append(exc)
        done.set()

    forward = threading.Thread(target=target, daemon=True, name="teacher-forward")
    try:
        forward.start()  # inside the try: start() waits for the thread to run, and a signal can land in that wait
        reached("teacher forward")
        while not done.wait(SIGNAL_POLL_S):  # a timed wait: the kernel may hand the signal to any thread (the
            pass  # forward's, a thread pool's), and only a wait that returns lets the main thread run its handler
    except BaseException as exc:  # a signal's: unwind now; at exit, end the process without waiting for the forward
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 130
        atexit.register(_exit_without, done, code)
        raise
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def _exit_without(done: threading.Event, code: int) -> None:
    """At exit, a forward still running would abort the interpreter's teardown (torch's C++ threads): end the
    process at once instead, with ``code`` (143 for SIGTERM, 130 for Ctrl-C)."""
    if not done.is_set():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _forward_and_add(teacher, inputs, acc: Accumulator, where: BatchIndex):
    """One CPU batch: the teacher's forward, then its token vectors added into the sums (same thread)."""
    output = teacher.run(inputs)
    acc.add(output.hidden, where)
    return output


def extraction_loop(teacher, texts: list[str], batches: list[np.ndarray], *, index: dict[str, int],
                    splitter: WordTokenizer, acc: Accumulator, first_batch: int = 0,
                    credits: list[set[int]] | None = None, batch_done=lambda b, pooled: None,
                    workers: int | None = None) -> dict[str, float]:
    """Run batches ``first_batch``.. through the teacher into ``acc`` (each vocabulary word, ``index``: its row,
    found by ``splitter``; ``credits``: the words each text credits, None: all it holds) while workers
    (``prefetch_workers`` unless given) prepare the next ones; ``batch_done(b, pooled)`` gets each batch's pooled
    vectors (on the device). Nothing waits for the device inside the loop. Returns timings."""

    def make(b: int):
        rows = batches[b]
        batch_texts = [texts[i] for i in rows]
        inputs = teacher.prepare(batch_texts)
        where = batch_index(batch_texts, inputs, index, splitter,
                            [credits[i] for i in rows] if credits is not None else None)
        return b, inputs, where

    cuda = teacher.device.type == "cuda"
    workers = prefetch_workers(teacher.device) if workers is None else workers
    todo = range(first_batch, len(batches))
    prefetch = WorkerPrefetcher(make, todo, workers, pin=cuda) if workers else ThreadPrefetcher(make, todo, pin=cuda)
    forward_s, events = 0.0, []
    with torch.inference_mode():
        for b, inputs, where in prefetch:
            if cuda:  # device time from events, read at the end: a synchronize here would stall the pipeline
                events.append((torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)))
                events[-1][0].record()
                output = teacher.run(inputs)
                events[-1][1].record()
                acc.add(output.hidden, where.to(teacher.device))
            else:  # the sums in the forward's own thread: its OpenMP team, not a second one beside it (2x slower)
                start = time.perf_counter()
                output = interruptible(_forward_and_add, teacher, inputs, acc, where)  # a batch can take minutes
                forward_s += time.perf_counter() - start
            batch_done(b, output.pooled.float())
    if cuda:
        torch.cuda.synchronize(teacher.device)
        forward_s = sum(start.elapsed_time(end) for start, end in events) / 1000
    return {"forward_s": forward_s, "wait_s": prefetch.wait_s, "workers": workers}


@dataclass
class _Checkpoints:
    """The extract stage's ``batch_done``: it keeps each batch's pooled vectors and shows progress in tokens; at a
    unit's end, once ``checkpoint_seconds`` have passed (and after the last batch), it writes them to ``targets``
    (in processing order) and saves the sums, so a killed run resumes after that unit."""

    run: StageRun
    selection: Selection
    acc: Accumulator
    targets: np.memmap  # the stage's targets file, flushed at each save
    unit_of_batch: np.ndarray
    position_of: np.ndarray
    checkpoint_seconds: float
    bar: Any  # a progress bar: update(n)
    pooled_parts: list[tuple[int, torch.Tensor]] = field(default_factory=list)
    last_save: float = field(default_factory=time.time)

    def __call__(self, b: int, pooled: torch.Tensor) -> None:
        batches = self.selection.batches
        self.pooled_parts.append((int(self.position_of[batches[b][0]]), pooled))
        self.bar.update(int(self.selection.lengths[batches[b]].sum()))
        unit_end = b + 1 == len(batches) or self.unit_of_batch[b + 1] != self.unit_of_batch[b]
        if unit_end and (time.time() - self.last_save >= self.checkpoint_seconds or b + 1 == len(batches)):
            self.save(int(self.unit_of_batch[b]) + 1)

    def save(self, units_done: int) -> None:
        for start, part in self.pooled_parts:
            self.targets[start : start + len(part)] = part.cpu().numpy()
        self.pooled_parts.clear()
        self.targets.flush()
        self.acc.save(self.run.partial / _STATE, units_done)
        self.last_save = time.time()
        self.run.unit_done(units_done)


def _resume(run: StageRun, acc: Accumulator, n_units: int) -> int:
    """The units a killed run's checkpoint holds (its sums loaded into ``acc``); 0 without one."""
    state_path = run.partial / _STATE
    units_done = (load_checkpoint(state_path, acc.load, "extract") or 0) if state_path.is_file() else 0
    if units_done:
        logger.info("extract: resuming after unit %d of %d", units_done, n_units)
    return units_done


def _write_vectors(out: Path, teacher, words: list[str], state: dict[str, np.ndarray]) -> dict:
    """Word and piece means and context counts into ``out`` (words with no context encoded alone); their stats."""
    word_vectors = means(state["word_sums"], state["word_counts"])
    contexts = state["word_counts"].astype(np.int64)
    alone = np.nonzero(contexts == 0)[0]
    if len(alone):
        word_vectors[alone] = embed_alone(teacher, [words[i] for i in alone])
    np.save(out / files.WORD_VECTORS, word_vectors)
    np.save(out / files.WORD_CONTEXTS, contexts)
    np.save(out / files.PIECE_VECTORS, means(state["piece_sums"], state["piece_counts"]))
    np.save(out / files.PIECE_CONTEXTS, state["piece_counts"].astype(np.int64))
    return {
        "words_with_context": int((contexts > 0).sum()),
        "mean_contexts": round(float(contexts.mean()), 2),
        "median_contexts": float(np.median(contexts)),
        "words_encoded_alone": int(len(alone)),
        "pieces_seen": int((state["piece_counts"] > 0).sum()),
    }


def _loop_stats(config: ExtractConfig, selection: Selection, processed: int, loop_s: float, timing: dict) -> dict:
    """The extraction loop's part of the stage's stats: what it encoded and how fast."""
    return {
        "mode": config.sentences,
        "encoded_sentences": len(selection.texts),
        "batches": len(selection.batches),
        "select_s": round(selection.select_s, 2),
        "sentences_per_s": round(processed / loop_s, 1) if loop_s > 0 else None,
        "forward_s": round(timing["forward_s"], 2),
        "forward_share": round(timing["forward_s"] / loop_s, 3) if loop_s > 0 else None,
        "prefetch_wait_s": round(timing["wait_s"], 2),
        "prefetch_workers": timing["workers"],
    }


def run_extract(ctx: StageContext, config: ExtractConfig, rules: TokenizationRules, corpus: StageResult,
                vocab: StageResult, selection: Selection, teacher) -> StageResult:
    """The extract stage over ``selection`` (made from the same config, rules, corpus, vocab, teacher and seed)."""

    def compute(run: StageRun) -> dict:
        from tqdm.auto import tqdm

        words, _ = read_vocab_stage(vocab)
        texts, lengths, batches = selection.texts, selection.lengths, selection.batches
        order = np.concatenate(batches) if batches else np.zeros(0, dtype=np.int64)
        # units: consecutive batches of about unit_sentences sentences; checkpoints fall on unit ends
        unit_of_batch = np.cumsum([len(b) for b in batches]) // config.unit_sentences
        acc = Accumulator(len(words), teacher_vocab_size(teacher), teacher.dim, teacher.device)
        units_done = _resume(run, acc, int(unit_of_batch[-1]) + 1 if len(batches) else 0)
        first_batch = int(np.searchsorted(unit_of_batch, units_done, side="left"))
        targets_path = run.partial / "targets.npy"
        targets = np.lib.format.open_memmap(targets_path, mode="r+" if units_done else "w+", dtype=np.float32,
                                            shape=(len(texts), teacher.pooled_dim))
        position_of = np.empty(len(order), dtype=np.int64)
        position_of[order] = np.arange(len(order))  # targets are stored in processing order
        done_sentences = int(sum(len(batches[b]) for b in range(first_batch)))
        # progress in tokens: batches run shortest first, so a sentence count would promise too early an end
        bar = tqdm(total=int(lengths.sum()), initial=int(lengths[order[:done_sentences]].sum()),
                   unit="tok", unit_scale=True, desc="extract", disable=run.quiet, smoothing=0.05)
        checkpoints = _Checkpoints(run, selection, acc, targets, unit_of_batch, position_of, ctx.checkpoint_seconds,
                                   bar)
        t_start = time.time()
        timing = extraction_loop(teacher, texts, batches, index={w: i for i, w in enumerate(words)},
                                 splitter=word_splitter(rules, teacher.tokenizer_json()), acc=acc,
                                 first_batch=first_batch, credits=selection.credits, batch_done=checkpoints)
        bar.close()
        loop_s = time.time() - t_start
        vector_stats = _write_vectors(run.out, teacher, words, acc.state())
        targets.flush()
        os.replace(targets_path, run.out / files.TARGETS)
        files.write_lines(run.out / files.TARGET_SENTENCES, (texts[i] for i in order))
        return {**_loop_stats(config, selection, len(texts) - done_sentences, loop_s, timing), **vector_stats,
                "resumed_after_unit": units_done, "teacher_dtype": teacher.dtype_name,
                "teacher_runtime": teacher.runtime}

    return ctx.run("extract", extract_identity(config, rules, teacher, ctx.seed), [corpus, vocab], compute)


def teacher_vocab_size(teacher) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_str(teacher.tokenizer_json()).get_vocab_size(with_added_tokens=True)


@dataclass
class Extracted:
    """The vectors of an extract artifact (its sentences and targets are read by the stages that use them)."""

    word_vectors: np.ndarray
    word_contexts: np.ndarray
    piece_vectors: np.ndarray
    piece_contexts: np.ndarray

    @classmethod
    def read(cls, folder: Path) -> Extracted:
        return cls(np.load(folder / files.WORD_VECTORS), np.load(folder / files.WORD_CONTEXTS),
                   np.load(folder / files.PIECE_VECTORS), np.load(folder / files.PIECE_CONTEXTS))
