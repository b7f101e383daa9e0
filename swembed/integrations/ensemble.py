"""Ensembles of static tables (paper appendix D, eq. 6-7).

Members' tables are concatenated over the union of their whole-word vocabularies. At encode time
each member's sub-space is averaged, L2-normalised and scaled by sqrt(w_k / sum w), so the dot
product of two ensemble vectors is the weighted mean of the members' cosines:

    <e(s), e(t)> = sum_k (w_k / W) cos(e_k(s), e_k(t)).

Members: swembed folders, ``wordllama`` (its shipped l2_supercat 256 table) and ``model2vec:<folder>``.
A member's row for a word is that member's own (unnormalised) encoding of the word alone, so
sub-word members (WordLlama's SentencePiece, model2vec's WordPiece) contribute what they would for
the word, averaged over words rather than over their sub-word tokens. The ensemble lower-cases
like swembed; for a case-sensitive member the word is encoded in the casing (lower, Capitalised, UPPER)
its tokenizer splits least (``paris`` -> ``Paris``, one token).

Unknown words back off as the first swembed member's do: with ``oov_backoff = "pieces"`` the ensemble keeps
its teacher tokenizer, its piece rows and its character-gram buckets (``swembed.runtime.tokenizer``). Each
member's block of a piece row is its own row for the same piece (matched by the piece's text, so members
whose teachers share a WordPiece vocabulary, as MiniLM and mpnet do, back off as they do alone),
else its encoding of the piece's text as a word; its block of a gram row is its own gram row where it has
the same number of buckets, else zero (an unknown word then weighs half as much in that member's sub-space).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from swembed.runtime.embedder import StaticEmbedder
from swembed.runtime.folder import write_model_folder
from swembed.runtime.outputs import check_writable
from swembed.runtime.tokenizer import WEIGHTS, TokenIds, TokenizationRules


@dataclass
class Member:
    """One ensemble member: its name, whole words, and an (unnormalised) word -> vector function."""

    name: str
    words: list[str]
    word_vectors: Callable[[list[str]], np.ndarray]
    model: StaticEmbedder | None = None  # a swembed member: its rules, tokenizer and back-off rows join the ensemble

    @property
    def rules(self) -> TokenizationRules | None:
        return self.model.tokenizer.rules if self.model is not None else None

    @property
    def tokenizer_json(self) -> str | None:
        subword = self.model.tokenizer.teacher_tokenizer if self.model is not None else None
        return subword.to_str() if subword is not None else None


def _fewest_pieces(tokenizer, words: list[str]) -> list[str]:
    """For each lower-case word, the casing that the (case-sensitive) tokenizer splits into fewest pieces."""
    forms = [words, [w.capitalize() for w in words], [w.upper() for w in words]]
    counts = np.array([[sum(e.attention_mask) for e in tokenizer.encode_batch(f, add_special_tokens=False)]
                       for f in forms])  # the mask, not len(ids): a tokenizer may pad
    best = np.argmin(counts, axis=0)  # ties keep the lower-case form
    return [forms[b][i] for i, b in enumerate(best)]


def _whole_words(pieces, marker: str | None, rules: TokenizationRules) -> list[str]:
    """Vocabulary entries that are whole words under ``rules`` (``marker``: the word-start prefix)."""
    pattern = re.compile(rules.word_pattern)
    words = set()
    for piece in pieces:
        if marker is not None:
            if not piece.startswith(marker):
                continue
            piece = piece[len(marker):]
        elif piece.startswith("##") or piece.startswith("["):
            continue
        word = piece.lower() if rules.lowercase else piece
        if pattern.fullmatch(word):
            words.add(word)
    return sorted(words)


def load_member(spec: str, rules: TokenizationRules) -> Member:
    if spec == "wordllama":
        import wordllama
        from wordllama import WordLlama

        model = WordLlama.load(disable_download=True, cache_dir=Path(wordllama.__file__).parent)
        return Member("wordllama", _whole_words(model.tokenizer.get_vocab(), "\u2581", rules),
                      lambda words: model.embed(_fewest_pieces(model.tokenizer, words), norm=False))
    if spec.startswith("model2vec:"):
        from model2vec import StaticModel

        model = StaticModel.from_pretrained(spec.split(":", 1)[1])
        model.normalize = False
        return Member(spec, _whole_words(model.tokenizer.get_vocab(), None, rules),
                      lambda words: model.encode(_fewest_pieces(model.tokenizer, words), use_multiprocessing=False))
    model = StaticEmbedder.load(spec)
    return Member(Path(spec).name, model.words, lambda words: model.encode(words, normalize=False), model)


def _rows(member: Member, words: list[str], batch_size: int) -> np.ndarray:
    """``member``'s rows for ``words``: its own encoding of each, unnormalised."""
    return np.concatenate([np.asarray(member.word_vectors(words[i : i + batch_size]), dtype=np.float32)
                           for i in range(0, len(words), batch_size)])


def _table_rows(model: StaticEmbedder, rows: list[int]) -> np.ndarray:
    """Rows ``rows`` of ``model``'s table as float32 (de-quantised; only those rows)."""
    ids = np.asarray(rows, dtype=np.int64)
    return model.mean_rows(TokenIds(ids, np.ones(len(ids), dtype=np.int64)), normalize=False)


def _piece_block(member: Member, pieces: list[str], dim: int, batch_size: int) -> np.ndarray:
    """``member``'s rows for the ensemble's piece rows: its own piece row for the same piece text, else its
    encoding of that text as a word (``##ing`` as ``ing``)."""
    model = member.model
    subword = model.tokenizer.teacher_tokenizer if model is not None else None
    own: list[int | None] = [None] * len(pieces)
    if model is not None and subword is not None:
        own = [model.tokenizer.piece_rows.get(i) if i is not None else None for i in map(subword.token_to_id, pieces)]
    have = [k for k, row in enumerate(own) if row is not None]
    missing = [k for k, row in enumerate(own) if row is None]
    rows = np.zeros((len(pieces), dim), dtype=np.float32)
    if have:
        assert model is not None  # only a swembed member has piece rows of its own
        rows[have] = _table_rows(model, [row for row in own if row is not None])
    if missing:
        rows[missing] = _rows(member, [pieces[k].removeprefix("##") for k in missing], batch_size)
    return rows


def _gram_block(member: Member, buckets: int, dim: int) -> np.ndarray:
    """``member``'s rows for the ensemble's gram buckets: its own where it has ``buckets`` of them, else zero."""
    model = member.model
    grams = model.tokenizer.gram_rows if model is not None else None
    if model is None or grams is None or grams[1] - grams[0] != buckets:
        return np.zeros((buckets, dim), dtype=np.float32)
    return _table_rows(model, list(range(*grams)))


def _backoff_rows(members: list[Member], dims: list[int], first: StaticEmbedder, offset: int, batch_size: int
                  ) -> tuple[list[str], list[list[np.ndarray]], dict]:
    """The first swembed member's piece and gram rows, placed after ``offset`` word rows: their labels, each
    member's blocks of them, and their ``config.json`` row ranges."""
    labels: list[str] = []
    blocks: list[list[np.ndarray]] = [[] for _ in members]
    ranges: dict = {}
    pieces = first.config.get("pieces")
    if pieces:
        names = first.labels[pieces["rows"][0] : pieces["rows"][1]]
        for block, member, dim in zip(blocks, members, dims):
            block.append(_piece_block(member, names, dim, batch_size))
        ranges["pieces"] = {"rows": [offset, offset + len(names)]}
        labels += names
    grams = first.tokenizer.gram_rows
    if grams:
        buckets = grams[1] - grams[0]
        for block, member, dim in zip(blocks, members, dims):
            block.append(_gram_block(member, buckets, dim))
        ranges["grams"] = {"rows": [offset + len(labels), offset + len(labels) + buckets]}
        labels += first.labels[grams[0] : grams[1]]
    return labels, blocks, ranges


def parse_weights(text: str) -> list[float]:
    """``--weights``: comma-separated numbers, one per member (their range is ``build_ensemble``'s to check)."""
    weights = []
    for part in text.split(","):
        try:
            weights.append(float(part))
        except ValueError:
            raise ValueError(f"--weights {text!r}: {part.strip()!r} is not a number; give one positive number per "
                             "member, comma-separated (e.g. 1,2)") from None
    return weights


def build_ensemble(specs: list[str], out: str | Path, weights: list[float] | None = None,
                   batch_size: int = 8192, overwrite: bool = False) -> Path:
    """Write an ensemble model folder of ``specs`` (weights default to 1 each)."""
    check_writable(Path(out), overwrite, specs)  # before any member is read
    if len(specs) < 2:
        raise ValueError("an ensemble needs at least two members")
    weights = [1.0] * len(specs) if weights is None else [float(w) for w in weights]
    if len(weights) != len(specs):
        raise ValueError(f"{len(weights)} weights for {len(specs)} members")
    if not all(WEIGHTS.holds(w) for w in weights):  # as load checks them (config.json's ensemble weights)
        raise ValueError(WEIGHTS.refusal("weights", weights))
    members = [load_member(s, TokenizationRules()) for s in specs]
    first_swe = next((m for m in members if m.rules is not None), None)
    rules = first_swe.rules if first_swe and first_swe.rules is not None else TokenizationRules(oov_backoff="none")
    if any(m.rules is not None and m.rules.splitting_only() != rules.splitting_only() for m in members):
        raise ValueError("swembed members disagree on tokenisation rules; ensemble tables with the same rules")
    words = list(dict.fromkeys(w for m in members for w in m.words))
    blocks = [[_rows(member, words, batch_size)] for member in members]
    dims = [int(block[0].shape[1]) for block in blocks]
    labels, ranges = list(words), dict[str, object]()
    first_model = first_swe.model if first_swe is not None else None
    if first_model is not None and rules.oov_backoff == "pieces":
        backoff_labels, backoff_blocks, ranges = _backoff_rows(members, dims, first_model, len(words), batch_size)
        labels += backoff_labels
        for block, backoff in zip(blocks, backoff_blocks):
            block += backoff
    subspaces = [{"member": member.name, "dim": dim, "weight": weight}
                 for member, dim, weight in zip(members, dims, weights)]
    config = {"ensemble": {"subspaces": subspaces, "members": specs},
              "tokenization": rules.to_dict(), **ranges}
    table = np.hstack([np.concatenate(block) for block in blocks])
    return write_model_folder(Path(out), table, labels, config,
                              first_swe.tokenizer_json if first_swe else None, overwrite=overwrite, inputs=specs)
