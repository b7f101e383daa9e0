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
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from swembed.runtime.folder import write_model_folder
from swembed.runtime.outputs import check_writable
from swembed.runtime.tokenizer import TokenizationRules


@dataclass
class Member:
    """One ensemble member: its name, whole words, and an (unnormalised) word -> vector function."""

    name: str
    words: list[str]
    word_vectors: Callable[[list[str]], np.ndarray]
    rules: TokenizationRules | None = None
    tokenizer_json: str | None = None


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
    from swembed.runtime.embedder import load

    model = load(spec)
    subword = model.tokenizer.teacher_tokenizer
    return Member(Path(spec).name, model.words, lambda words: model.encode(words, normalize=False),
                  model.tokenizer.rules, subword.to_str() if subword is not None else None)


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
    if any(not 0 < w < math.inf for w in weights):
        raise ValueError(f"weights must be positive and finite, got {weights}")
    members = [load_member(s, TokenizationRules()) for s in specs]
    first_swe = next((m for m in members if m.rules is not None), None)
    rules = first_swe.rules if first_swe else TokenizationRules(oov_backoff="none")
    if rules.oov_backoff == "pieces":  # piece rows are per member: the ensemble backs off to a known prefix
        rules = replace(rules, oov_backoff="teacher_prefix")
    if any(m.rules is not None and m.rules.splitting_only() != rules.splitting_only() for m in members):
        raise ValueError("swembed members disagree on tokenisation rules; ensemble tables with the same rules")
    words = list(dict.fromkeys(w for m in members for w in m.words))
    blocks, subspaces = [], []
    for member, weight in zip(members, weights):
        rows = np.concatenate([np.asarray(member.word_vectors(words[i : i + batch_size]), dtype=np.float32)
                               for i in range(0, len(words), batch_size)])
        blocks.append(rows)
        subspaces.append({"member": member.name, "dim": int(rows.shape[1]), "weight": weight})
    config = {"ensemble": {"subspaces": subspaces, "members": specs},
              "tokenization": rules.to_dict()}
    return write_model_folder(Path(out), np.hstack(blocks), words, config,
                              first_swe.tokenizer_json if first_swe else None, overwrite=overwrite, inputs=specs)
