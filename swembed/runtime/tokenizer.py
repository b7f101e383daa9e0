"""Inference tokenisation (paper 4.1): words, punctuation dropped, lower-cased lookup, OOV back-off.

A *word* is a maximal run of letters, digits and marks (regex ``[^\\W_]+``); everything else
(punctuation, symbols, whitespace, underscores) separates words and is dropped. This is the same
split BERT's pre-tokenizer makes, so word spans never cut through a WordPiece token.

An out-of-vocabulary word backs off through the teacher's sub-word tokenizer (``oov_backoff``):

* ``pieces``: the word is split into the teacher's pieces, and the pieces' own rows (the table's
  *piece rows*, extracted from their corpus occurrences and trained to compose) stand in for it, each
  weighted w/p so the word counts w times in the sentence mean (``oov_weight`` w, default 1: an unknown
  word is rarer than any known one, and may weigh more). A table with *gram rows* (fastText-style
  character n-grams hashed into buckets, fitted to the word rows: ``swembed.pipeline.grams``) averages two
  halves: the mean of the pieces and the mean of the word's gram rows, each of weight w/2;
* ``teacher_prefix``: trailing pieces are dropped until the remaining prefix is a vocabulary word
  (``goodness`` -> ``good``); a word with no such prefix is skipped;
* ``none``: unknown words are skipped.

For languages written without spaces (zh, ja) a table may instead use the teacher's own tokens as
its words (``words = "teacher"``, the paper's choice for its zh/ja tables): the teacher tokenizer
splits the text and each token (its ``▁`` marker stripped) is looked up. Or a real word segmenter
splits them (``words = "jieba"`` for Chinese, ``"fugashi"`` for Japanese with unidic-lite; optional
packages imported on first use), with the usual back-off for unknown words.
"""
from __future__ import annotations

import re
import unicodedata
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from swembed.runtime.ranges import Range
from swembed.runtime.settings import Key, declaration, setting

if TYPE_CHECKING:
    from tokenizers import Tokenizer

WORD_PATTERN = r"[^\W_]+"
WORD_MODES = ("pattern", "teacher", "jieba", "fugashi")  # jieba (zh) and fugashi + unidic-lite (ja): segmenters
BACKOFFS = ("pieces", "teacher_prefix", "none")
NORMALIZATION_FORMS = ("NFKC", "NFC", "NFKD", "NFD", "")  # "": none
NormalForm = Literal["NFC", "NFD", "NFKC", "NFKD"]
_HAS_WORD_CHAR = re.compile(r"[^\W_]")
_OOV_CACHE_LIMIT = 1_000_000
GRAM_SIZES = (3, 4, 5)  # character n-gram lengths of the gram rows, over the word marked as "<word>"
# A weight of the mean (oov_weight, an ensemble member's weight): within this range no float32 sum of rows (each
# value at most 1e15 in magnitude: swembed.runtime.folder.MAGNITUDES) overflows, and no share of it underflows.
WEIGHTS = Range(1e-6, 1e6)
# A word pattern is one or more alternatives (``|``), each a run (``+``) of one character class: ``[...]`` or a
# class escape (``\w``, ``\d``, ...). The regex then never backtracks: a greedy run followed by nothing always
# succeeds, so matching a text is linear in its length (a pattern such as ``(?:a+)+b`` is exponential).
_CLASS_RUN = r"(?:\[(?:\\.|[^\\\]\[])+\]|\\[wWdDsS])\+"
_VETTED_PATTERN = re.compile(f"{_CLASS_RUN}(?:\\|{_CLASS_RUN})*")


def char_gram_buckets(word: str, buckets: int) -> list[int]:
    """The bucket of each character n-gram (``GRAM_SIZES``) of ``<word>``: CRC-32 of its UTF-8, modulo
    ``buckets`` (fastText's sub-word scheme, with a hash that is the same in every process)."""
    marked = f"<{word}>"
    return [zlib.crc32(marked[i : i + n].encode()) % buckets
            for n in GRAM_SIZES for i in range(len(marked) - n + 1)]


@dataclass(frozen=True)
class TokenizationRules:
    """How text becomes words; the build holds one per language and saves it in the model's config.json,
    so every stage and every reader agrees."""

    # the build's stages key the rules they split by (``to_dict``, ``splitting_only``): Key.BY_STAGE
    word_pattern: str = setting(WORD_PATTERN, key=Key.BY_STAGE)
    lowercase: bool = setting(True, key=Key.BY_STAGE, flag="--cased", help="case-sensitive words (default: "
                              "lower-cased)")
    unicode_normalization: str = setting("NFKC", key=Key.BY_STAGE, choices=NORMALIZATION_FORMS)
    oov_backoff: str = setting("teacher_prefix", key=Key.BY_STAGE, choices=BACKOFFS, flag="--backoff",
                               help="unknown words: the teacher's pieces, the longest known prefix, or skipped")
    words: str = setting("pattern", key=Key.BY_STAGE, choices=WORD_MODES)
    # an unknown word's weight in the mean (a known word's is 1), shared by its back-off rows
    oov_weight: float = setting(1.0, key=Key.BY_STAGE, within=WEIGHTS)

    def __post_init__(self) -> None:
        """Each value of the right type and range (a hand-edited config.json fails here, naming the key)."""
        # ValueError, not TypeError, for a wrong type too: each is a bad value in a config file or recipe
        if not isinstance(self.word_pattern, str):
            raise ValueError(f"tokenization word_pattern must be a string, got {self.word_pattern!r}")  # noqa: TRY004
        try:
            pattern = re.compile(self.word_pattern)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ValueError(f"tokenization word_pattern is not a regular expression ({exc}): "
                             f"{self.word_pattern!r}") from None
        if pattern.groups or pattern.fullmatch(""):  # findall would give tuples or empty words
            raise ValueError(f"tokenization word_pattern must match words: no capturing group (write (?:...)) and "
                             f"not the empty text, got {self.word_pattern!r}")
        if not _VETTED_PATTERN.fullmatch(self.word_pattern):
            raise ValueError("tokenization word_pattern must be runs of one character class, [...]+ or \\w+ (several "
                             f"joined by |), which match in linear time; got {self.word_pattern!r}")
        if not isinstance(self.lowercase, bool):
            raise ValueError(f"tokenization lowercase must be true or false, got {self.lowercase!r}")  # noqa: TRY004
        declared = {item.name: declaration(item) for item in fields(self)}
        for name in ("unicode_normalization", "words", "oov_backoff"):
            choices = declared[name].choices  # type: ignore[union-attr]
            if getattr(self, name) not in choices:
                raise ValueError(f"tokenization {name} must be one of {choices}, got {getattr(self, name)!r}")
        weight = self.oov_weight
        if (not isinstance(weight, (int, float)) or isinstance(weight, bool)
                or not declared["oov_weight"].within.holds(weight)):  # type: ignore[union-attr]
            raise ValueError(WEIGHTS.refusal("tokenization oov_weight", weight))

    def to_dict(self) -> dict:
        data = asdict(self)
        if data["oov_weight"] == 1.0:
            del data["oov_weight"]  # stage keys and model configs from before the option stay valid
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> TokenizationRules:
        unknown = [k for k in data if k not in cls.__dataclass_fields__]
        if unknown:
            raise ValueError(f"tokenization has unknown key {unknown[0]!r} (known: "
                             f"{', '.join(cls.__dataclass_fields__)})")
        return cls(**data)

    def splitting_only(self) -> TokenizationRules:
        """The same word split with no back-off (what the vocab and extract stages split sentences with)."""
        return replace(self, oov_backoff="none", oov_weight=1.0)


def normalize_text(text: str, form: str) -> str:
    """Unicode-normalise ``text`` (ASCII needs nothing, so it skips the call)."""
    if not form or text.isascii():
        return text
    return unicodedata.normalize(cast(NormalForm, form), text)  # TokenizationRules admits only these forms


@dataclass
class TokenIds:
    """Table rows for a batch of texts, concatenated: text i owns the next ``lengths[i]`` entries of ``ids``.
    ``weights`` (None when all are 1) are the rows' weights in the mean: 1 for a word, w/p for each of the p
    pieces of an unknown word (``oov_weight`` w), so every unknown word counts w times."""

    ids: np.ndarray
    lengths: np.ndarray
    weights: np.ndarray | None = None

    @classmethod
    def from_lists(cls, rows: Sequence[tuple[Sequence[int], Sequence[float]]]) -> TokenIds:
        lengths = np.fromiter((len(ids) for ids, _ in rows), dtype=np.int64, count=len(rows))
        ids = np.fromiter((i for r, _ in rows for i in r), dtype=np.int64, count=int(lengths.sum()))
        weights = np.fromiter((w for _, ws in rows for w in ws), dtype=np.float32, count=int(lengths.sum()))
        return cls(ids, lengths, None if (weights == 1).all() else weights)


class WordTokenizer:
    """Turns text into table rows with the rules of one model folder (one language of it).

    ``vocab`` maps words to rows; ``teacher_tokenizer`` is the teacher's tokenizer (back-off, or the words
    themselves for ``words = "teacher"``); ``piece_rows`` maps teacher token ids to piece rows (``pieces``
    back-off); ``gram_rows`` is the [start, end) range of the table's gram rows, if it has them.
    """

    def __init__(
        self,
        vocab: Mapping[str, int],
        rules: TokenizationRules | None = None,
        teacher_tokenizer: Tokenizer | None = None,
        piece_rows: Mapping[int, int] | None = None,
        gram_rows: Sequence[int] | None = None,
    ) -> None:
        self.vocab = vocab
        self.rules = rules or TokenizationRules()
        if self.rules.words == "teacher" and teacher_tokenizer is None:
            raise ValueError("words = 'teacher' needs the teacher's tokenizer.json")
        self._pattern = re.compile(self.rules.word_pattern)
        self._find_words = self._pattern.findall if self.rules.words == "pattern" else self._split_words
        self.teacher_tokenizer = teacher_tokenizer  # back-off pieces (unless oov_backoff is none), or the words
        self._special = ({t.content for t in teacher_tokenizer.get_added_tokens_decoder().values() if t.special}
                         if teacher_tokenizer is not None else set())
        self.piece_rows = dict(piece_rows or {})
        self.gram_rows = tuple(gram_rows) if gram_rows else None
        self._space_prefix = teacher_tokenizer is not None and _pieces_need_space(teacher_tokenizer)
        self._oov: dict[str, tuple[list[int], list[float]]] = {}
        # Batch path for a custom word pattern: one regex pass over texts joined by "\n", where "\n" itself is a
        # token (id -2); the default pattern takes the byte path (``_split_bytes``).
        self._find_tokens = re.compile(f"(?:{self.rules.word_pattern})|\n").findall
        self._lookup: dict[str, int] | None = None
        self._byte_lookup: dict[bytes, int] | None = None

    def prepare(self, text: str) -> str:
        """Normalise and (if the rules say so) lower-case ``text``."""
        text = normalize_text(text, self.rules.unicode_normalization)
        return text.lower() if self.rules.lowercase else text

    def words(self, text: str) -> list[str]:
        """The words of ``text`` after normalisation, punctuation dropped."""
        return self._find_words(self.prepare(text))

    def _split_words(self, text: str) -> list[str]:
        return [w for w, _, _ in self._mode_spans(text)]

    def _mode_spans(self, text: str) -> list[tuple[str, int, int]]:
        if self.rules.words == "teacher":
            return self._teacher_spans(text)
        return [(w, a, b) for w, a, b in segment(text, self.rules.words) if _HAS_WORD_CHAR.search(w)]

    def _teacher_spans(self, text: str) -> list[tuple[str, int, int]]:
        assert self.teacher_tokenizer is not None  # words = "teacher" needs one (__init__)
        encoding = self.teacher_tokenizer.encode(text, add_special_tokens=False)
        return [(token.lstrip("\u2581"), start, end) for token, (start, end) in zip(encoding.tokens, encoding.offsets)
                if token not in self._special and _HAS_WORD_CHAR.search(token)]

    def spans(self, text: str) -> list[tuple[str, int, int]]:
        """(word, start, end) for each word of an already normalised ``text``, spans in its characters (the
        extraction stage credits the teacher tokens that overlap each span); case-folded if the rules say so."""
        if self.rules.words == "pattern":
            found = [(m.group(), m.start(), m.end()) for m in self._pattern.finditer(text)]
        else:
            found = self._mode_spans(text)
        return [(w.lower(), a, b) for w, a, b in found] if self.rules.lowercase else found

    def rows(self, text: str) -> tuple[list[int], list[float]]:
        """Table rows of ``text``'s words and their weights, with OOV back-off; unknown words are skipped."""
        vocab_get = self.vocab.get
        ids: list[int] = []
        weights: list[float] = []
        for word in self._find_words(self.prepare(text)):
            idx = vocab_get(word)
            if idx is not None:
                ids.append(idx)
                weights.append(1.0)
            else:
                rows, row_weights = self.backoff(word)
                ids += rows
                weights += row_weights
        return ids, weights

    def ids(self, text: str) -> list[int]:
        """Table rows of ``text`` (weights dropped: see ``rows``)."""
        return self.rows(text)[0]

    def encode_batch(self, texts: Sequence[str]) -> TokenIds:
        """The rows of all texts, concatenated; the same as ``rows`` text by text.

        One pass over the texts joined by newlines (bytes translate and split for the default word
        pattern, else one regex) and C-level dictionary lookups; only the batch's distinct OOV
        words go through Python (and are cached).
        """
        # Teacher-token or segmenter words, or normalisation made or ate a newline: go text by text.
        prepared = self._prepare_batch(texts) if self.rules.words == "pattern" else None
        if prepared is None or prepared.count("\n") != len(texts) - 1:
            return TokenIds.from_lists([self.rows(t.replace("\n", " ")) for t in texts])
        if self.rules.word_pattern == WORD_PATTERN:
            tokens = _split_bytes(prepared, self._pattern)
            if self._byte_lookup is None:
                self._byte_lookup = {word.encode(): row for word, row in self.vocab.items()}
                self._byte_lookup[_NEWLINE] = -2
            lookup: Mapping[Any, int] = self._byte_lookup
        else:
            tokens = self._find_tokens(prepared)
            if self._lookup is None:
                self._lookup = {**self.vocab, "\n": -2}
            lookup = self._lookup
        ids = np.fromiter(map(lookup.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))
        unknown = np.flatnonzero(ids == -1)
        weights = None
        if len(unknown):
            ids, weights = self._expand_unknown(ids, unknown, list(map(tokens.__getitem__, unknown.tolist())))
        text_of_token = np.cumsum(ids == -2)
        keep = ids >= 0
        lengths = np.bincount(text_of_token[keep], minlength=len(texts))
        if weights is not None:
            weights = weights[keep]
            if (weights == 1).all():
                weights = None
        return TokenIds(ids[keep], lengths, weights)

    def _prepare_batch(self, texts: Sequence[str]) -> str:
        """The texts joined by newlines (a newline inside a text read as a space), each ``prepare``d: only the
        texts that are not ASCII are normalised, one by one (a newline is a normalisation boundary)."""
        joined = "\n".join(texts)
        if joined.count("\n") != len(texts) - 1:  # a text holds a newline
            texts = [t.replace("\n", " ") for t in texts]
            joined = "\n".join(texts)
        form = self.rules.unicode_normalization
        if form and not joined.isascii() and not unicodedata.is_normalized(cast(NormalForm, form), joined):
            joined = "\n".join([normalize_text(t, form) for t in texts])
        return joined.lower() if self.rules.lowercase else joined

    def _expand_unknown(self, ids: np.ndarray, unknown: np.ndarray,
                        words: Sequence[str | bytes]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, weights) with each unknown token (at positions ``unknown`` of ``ids``, its word in ``words``)
        replaced by its back-off rows and their weights; each distinct word is backed off once."""
        distinct = {word: index for index, word in enumerate(dict.fromkeys(words))}
        which = np.fromiter(map(distinct.__getitem__, words), dtype=np.int64, count=len(words))
        expansions = [self.backoff(w.decode() if isinstance(w, bytes) else w) for w in distinct]
        sizes = np.fromiter((len(rows) for rows, _ in expansions), dtype=np.int64, count=len(expansions))
        rows = np.array([r for rs, _ in expansions for r in rs], dtype=np.int64)
        row_weights = np.array([w for _, ws in expansions for w in ws], dtype=np.float32)
        counts = np.ones(len(ids), dtype=np.int64)
        counts[unknown] = sizes[which]
        expanded = np.repeat(ids, counts)
        weights = np.ones(len(expanded), dtype=np.float32)
        slots = sizes[which]  # each occurrence's rows
        occurrence = np.repeat(np.arange(len(unknown)), slots)
        within = np.arange(int(slots.sum())) - np.repeat(np.cumsum(slots) - slots, slots)
        target = (np.cumsum(counts) - counts)[unknown][occurrence] + within
        source = (np.cumsum(sizes) - sizes)[which][occurrence] + within
        expanded[target] = rows[source]
        weights[target] = row_weights[source]
        return expanded, weights

    def word_pieces(self, word: str) -> list[int]:
        """The teacher's token ids for ``word`` as it appears inside a sentence (BPE teachers mark a word start
        with its leading space, so the word is encoded after one)."""
        if self.teacher_tokenizer is None:
            return []
        if not self._space_prefix:
            return self.teacher_tokenizer.encode(word, add_special_tokens=False).ids
        encoding = self.teacher_tokenizer.encode(" " + word, add_special_tokens=False)
        return [i for i, (start, end) in zip(encoding.ids, encoding.offsets) if end > 1 or start >= 1]

    def backoff(self, word: str) -> tuple[list[int], list[float]]:
        """Rows and weights standing in for an unknown ``word`` (see the module docstring); cached."""
        cached = self._oov.get(word)
        if cached is not None:
            return cached
        halves: list[list[int]] = []  # each half weighs w / (number of halves), shared by its rows
        if self.rules.oov_backoff == "pieces":
            if self.teacher_tokenizer is not None:
                halves.append([r for r in (self.piece_rows.get(i) for i in self.word_pieces(word)) if r is not None])
            if self.gram_rows:
                start, end = self.gram_rows
                halves.append([start + bucket for bucket in char_gram_buckets(word, end - start)])
        elif self.rules.oov_backoff == "teacher_prefix" and self.teacher_tokenizer is not None:
            ends = [end for _, end in self.teacher_tokenizer.encode(word, add_special_tokens=False).offsets]
            for end in reversed(ends[:-1]):
                candidate = self.vocab.get(word[:end])
                if candidate is not None:
                    halves.append([candidate])
                    break
        halves = [half for half in halves if half]
        result = ([row for half in halves for row in half],
                  [self.rules.oov_weight / len(halves) / len(half) for half in halves for _ in half])
        if len(self._oov) < _OOV_CACHE_LIMIT:
            self._oov[word] = result
        return result


_NEWLINE = b"\x01"  # a text boundary in the byte path (a control character: never part of a word)
_WORD_BYTES = bytes(range(48, 58)) + bytes(range(65, 91)) + bytes(range(97, 123))  # ASCII letters and digits
# ASCII non-word bytes become spaces, the newline becomes the boundary mark; bytes >= 128 (UTF-8 of any
# non-ASCII character) are kept, non-word characters among them having been replaced by spaces first.
_BYTE_TABLE = bytes(b if b in _WORD_BYTES or b >= 128 else (_NEWLINE[0] if b == 10 else 32) for b in range(256))
_ASCII = bytes(range(128))
_FEW_CHARACTERS = 8  # up to this many distinct non-ASCII non-word characters are replaced one by one
_NON_ASCII_IS_WORD: dict[str, bool] = {}  # whether the default word pattern matches each non-ASCII character


def _split_bytes(prepared: str, pattern: re.Pattern) -> list[bytes]:
    """The words of ``prepared`` (texts joined by newlines) as UTF-8 bytes, each newline a ``_NEWLINE`` token:
    ``pattern.findall`` (the default ``[^\\W_]+``, a per-character class) done by C-level byte replaces, a
    translate and a split, about 2x faster than the regex. The few distinct non-ASCII characters present are
    classified by the pattern itself (cached); those that are not word characters become spaces first."""
    data = prepared.encode("utf-8")
    if not data.isascii():
        present = set(data.translate(None, delete=_ASCII).decode("utf-8"))
        for char in present:
            if char not in _NON_ASCII_IS_WORD:
                _NON_ASCII_IS_WORD[char] = pattern.fullmatch(char) is not None
        spaces = [char for char in present if not _NON_ASCII_IS_WORD[char]]
        if len(spaces) > _FEW_CHARACTERS:  # one pass for all (a replace each made scientific text, ~100, slow)
            data = re.sub("|".join(map(re.escape, sorted(spaces))).encode("utf-8"), b" ", data)
        else:  # a few: a C-level replace each is faster (UTF-8 is self-synchronising: the same bytes as the pass)
            for char in spaces:
                data = data.replace(char.encode("utf-8"), b" ")
    return data.translate(_BYTE_TABLE).replace(_NEWLINE, b" " + _NEWLINE + b" ").split()


def _pieces_need_space(tokenizer) -> bool:
    """Whether the tokenizer marks word starts by a leading space (byte-level BPE: ``Ġword``), so that a word
    looked up alone must be encoded after a space to get the pieces it has inside a sentence."""
    alone = tokenizer.encode("word", add_special_tokens=False).ids
    inside = tokenizer.encode("a word", add_special_tokens=False).ids
    return bool(alone) and alone[0] not in inside


def word_splitter(rules: TokenizationRules, tokenizer_json: str | None) -> WordTokenizer:
    """The vocabulary-less tokenizer whose ``spans``/``words`` split sentences for the vocab and extract stages."""
    from tokenizers import Tokenizer

    # words = "teacher" without a tokenizer.json: WordTokenizer refuses it
    pieces = Tokenizer.from_str(tokenizer_json) if rules.words == "teacher" and tokenizer_json is not None else None
    return WordTokenizer({}, rules.splitting_only(), pieces)


def iter_words(texts: Iterable[str], splitter: WordTokenizer) -> Iterable[str]:
    """Every word of every (already normalised) text, as the vocab stage counts them."""
    if splitter.rules.words != "pattern":
        for text in texts:
            yield from (w for w, _, _ in splitter.spans(text))
        return
    find = splitter._pattern.findall
    for text in texts:
        yield from find(text.lower() if splitter.rules.lowercase else text)


_SEGMENTERS: dict[str, Any] = {}  # jieba, or a fugashi Tagger


def segment(text: str, name: str) -> list[tuple[str, int, int]]:
    """(word, start, end) from a word segmenter: ``jieba`` (Chinese) or ``fugashi`` (Japanese, unidic-lite)."""
    if name == "jieba":
        if "jieba" not in _SEGMENTERS:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            _SEGMENTERS["jieba"] = jieba
        return list(_SEGMENTERS["jieba"].tokenize(text))
    if name == "fugashi":
        if "fugashi" not in _SEGMENTERS:
            import fugashi

            _SEGMENTERS["fugashi"] = fugashi.Tagger()
        spans, at = [], 0
        for node in _SEGMENTERS["fugashi"](text):
            start = text.find(node.surface, at)
            if start < 0:  # the tagger normalised this piece: no span in the text to credit, skip it
                continue
            at = start + len(node.surface)
            spans.append((node.surface, start, at))
        return spans
    raise ValueError(f"unknown segmenter {name!r}; known: jieba, fugashi")
