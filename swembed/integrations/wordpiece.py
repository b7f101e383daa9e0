"""The Hugging Face tokenizer and table that the ``st`` and ``model2vec`` exports read: swembed's encoding
(``swembed.runtime.tokenizer``) spelled as a ``tokenizers`` pipeline, as far as one can spell it.

* **Words**: the normalizer applies the table's Unicode normalisation and lower-casing and writes ``</w>`` after
  every word (a run of letters and numbers, ``[\\p{L}\\p{N}]``: the default word pattern); the pre-tokenizer keeps
  only the words with their mark. A table word ``w`` is the token ``w</w>``, which matches a whole word only.
* **Unknown words**: a WordPiece model over the teacher's own pieces (word-initial ``t``, continuations ``##t``)
  and their word-final forms (``t</w>``, ``##t</w>``) splits an unknown word exactly as the teacher's WordPiece
  does (greedy longest match; ``</w>`` never matches early, since a form ending in it covers the rest of the
  word). Where the teacher strips accents the normalizer does too (after the words are marked) and the table's
  words are spelled without them; where it spaces CJK characters they end words. A word that is a single teacher
  token (``t</w>``) gets swembed's own back-off vector of it, weight included, gram rows too. A word of p >= 2
  pieces gets ``oov_weight * END_PIECE`` on its first and last piece rows and ``* MIDDLE_PIECE`` on the others where
  swembed gives each ``oov_weight / p`` (the libraries weigh a token the same wherever it stands), and no gram rows
  (character n-grams have no tokenizer form). ``teacher_prefix`` tables: a table word is also a word-initial token
  (the longest known start of an unknown word, not always at a piece boundary as in swembed).
* **Weights** live in the rows (the libraries L2-normalise a plain mean of token rows, so a row's scale is its
  weight); tokens without a row (``[UNK]``, pieces the table has no row for) are zero rows.

So the export differs from swembed on texts with an unknown word of two pieces or more, with a table word spelled
with accents that an unaccented table word shares a token with, or with a table word holding CJK characters; and by
Greek final sigma (lower-cased as sigma) and the Unicode tables of Rust where they differ from Python's 14.0.0.
``swembed export`` measures by how much (``swembed.integrations.agreement``).

A multilingual table's languages share one vocabulary, since these libraries cannot be told a text's language:
a surface form that several languages have keeps the row of the language that saw it in the most sentences at
build time (``word_contexts.npy``; else the first language). A language without spaces (zh/ja: teacher tokens or a
segmenter's words) has its words as initial, continuation and word-final tokens too, so WordPiece's greedy longest
match reads a run of them as those words.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from swembed.runtime import StaticEmbedder
from swembed.runtime.tokenizer import WORD_PATTERN, TokenizationRules, WordTokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

END_OF_WORD = "</w>"
WORD_CHARACTER = r"[\p{L}\p{N}]"  # the default word pattern's characters, in Oniguruma (what tokenizers runs)
# The code points BERT's normalizer spaces (handle_chinese_chars): each is a word of its own to the teacher
CJK_CHARACTER = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}"
                 r"\x{2B920}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")
# The weight (times oov_weight) of each piece row of an unknown word of p >= 2 pieces, where swembed gives
# oov_weight / p: the first and last piece END_PIECE, the others MIDDLE_PIECE, so the word weighs 0.8, 1.0, 1.2 ...
# oov_weight for p = 2, 3, 4 ... (picked on STS-B dev and the probe texts among 0.35-0.5 / 0.15-0.5: docs/export.md)
END_PIECE, MIDDLE_PIECE = 0.4, 0.2
UNKNOWN = "[UNK]"
Row = tuple[int, float]  # (table row, or -1 for a zero row; its weight)


def wordpiece_spelling(pieces: Tokenizer | None, lowercase: bool) -> Callable[[str], str]:
    """How the teacher's pieces are spelled in a WordPiece vocabulary. WordPiece pieces are as they are;
    sentencepiece (Unigram, e5/XLM-R) marks a word start with '▁' where WordPiece marks a continuation with '##',
    and its pieces are cased where our words may be lowercased (then the first spelling wins)."""
    if pieces is None or json.loads(pieces.to_str())["model"]["type"] != "Unigram":
        return lambda piece: piece
    case = str.lower if lowercase else str
    return lambda piece: case(piece[1:]) or piece if piece.startswith("▁") else "##" + case(piece)


def teacher_config(model: StaticEmbedder) -> dict:
    """The teacher's tokenizer.json as a dict (empty for a table without one)."""
    teacher = model.tokenizer.teacher_tokenizer
    return json.loads(teacher.to_str()) if teacher is not None else {}


def strips_accents(teacher: dict) -> bool:
    """Whether the teacher's normalizer strips accents (BERT uncased: ``strip_accents`` null follows
    ``lowercase``), as it does to an unknown word before splitting it."""
    normalizer = teacher.get("normalizer") or {}
    for step in normalizer.get("normalizers", [normalizer]):
        if step.get("type") == "BertNormalizer":
            strip = step.get("strip_accents")
            return bool(step.get("lowercase", True) if strip is None else strip)
        if step.get("type") == "StripAccents":
            return True
    return False


def spaces_cjk(model: StaticEmbedder, teacher: dict) -> bool:
    """Whether the export reads each CJK character as a word of its own, as the teacher does before splitting an
    unknown word (BERT's ``handle_chinese_chars``): only in a table whose words all come from the word pattern (a
    zh/ja table's words are runs of them). A table word holding one is then never matched (measured, not exact)."""
    normalizer = teacher.get("normalizer") or {}
    spaced = any(step.get("type") == "BertNormalizer" and step.get("handle_chinese_chars", True)
                 for step in normalizer.get("normalizers", [normalizer]))
    return spaced and all(tok.rules.words == "pattern" for tok in (list(model.tokenizers.values()) or
                                                                   [model.tokenizer]))


def accent_stripper(teacher: dict) -> Callable[[str], str]:
    """How the export's normalizer spells a word: without its accents (NFD, combining marks removed) when the
    teacher strips them, else as it is."""
    if not strips_accents(teacher):
        return lambda word: word
    from tokenizers import normalizers

    strip = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents()])
    return strip.normalize_str


def word_tokens(model: StaticEmbedder) -> dict[str, int]:
    """Each table word's tokens and its row: ``w</w>``; in a language without spaces also ``w``, ``##w`` and
    ``##w</w>``. Where the teacher strips accents, w is spelled without them, and of two words that then share a
    token the one without accents keeps it (``cafe`` over ``café``), else the one seen in more sentences. Languages
    merge as the module's doc says."""
    spell = accent_stripper(teacher_config(model))
    tokenizers = list(model.tokenizers.values()) or [model.tokenizer]
    splitting = {replace(tokenizer.rules, words="pattern", oov_backoff="none") for tokenizer in tokenizers}
    if len(splitting) > 1:
        raise ValueError(f"the languages {model.languages} of this table normalise or split text differently, which "
                         "one st/model2vec tokenizer cannot express; export it as npy")
    counts = model.word_contexts
    rows: dict[str, tuple[int, tuple[bool, float]]] = {}  # token -> (row, its rank: the highest keeps the token)
    for tokenizer in tokenizers:
        spaced = tokenizer.rules.words == "pattern"
        for word, row in tokenizer.vocab.items():
            spelled = spell(word)
            rank = (spelled == word, float(counts[row]) if counts is not None else 0.0)
            for token in (spelled + END_OF_WORD,) if spaced else (spelled, "##" + spelled, spelled + END_OF_WORD,
                                                                   "##" + spelled + END_OF_WORD):
                kept = rows.get(token)
                if kept is None or rank > kept[1]:
                    rows[token] = (row, rank)
    return {token: row for token, (row, _) in rows.items()}


def teacher_pieces(tokenizer: WordTokenizer) -> list[tuple[str, int]]:
    """(WordPiece spelling, piece row or -1) of every teacher token an unknown word can be split into (added tokens
    and pieces that are not word characters left out: no word reaches them), in the teacher's id order."""
    teacher = tokenizer.teacher_tokenizer
    if teacher is None:
        return []
    spell = wordpiece_spelling(teacher, tokenizer.rules.lowercase)
    word = re.compile(WORD_PATTERN)
    found = []
    for token, token_id in sorted(teacher.get_vocab(with_added_tokens=False).items(), key=lambda item: item[1]):
        spelled = spell(token)
        if word.fullmatch(spelled.removeprefix("##")):
            found.append((spelled, tokenizer.piece_rows.get(token_id, -1)))
    return found


def piece_weights(rules: TokenizationRules) -> tuple[float, float]:
    """(first or last, middle) piece's weight in an unknown word of two pieces or more (0 when the table's
    back-off does not use piece rows)."""
    scale = rules.oov_weight if rules.oov_backoff == "pieces" else 0.0
    return scale * END_PIECE, scale * MIDDLE_PIECE


def export_entries(model: StaticEmbedder) -> tuple[dict[str, Row], dict[str, str]]:
    """(token -> (row, weight), token -> the unknown word whose whole back-off vector it carries): the words,
    then the teacher's pieces and their word-final forms, then ``[UNK]``."""
    entries: dict[str, Row] = {token: (row, 1.0) for token, row in word_tokens(model).items()}
    rules = model.tokenizer.rules
    if rules.oov_backoff == "teacher_prefix":  # a known word begins an unknown one: the longest such prefix
        for token, (row, _) in list(entries.items()):
            if token.endswith(END_OF_WORD) and not token.startswith("##"):
                entries.setdefault(token.removesuffix(END_OF_WORD), (row, rules.oov_weight))
    whole: dict[str, str] = {}
    end, middle = piece_weights(rules)
    for spelled, row in teacher_pieces(model.tokenizer):
        continuation = spelled.startswith("##")
        entries.setdefault(spelled, (row, middle if continuation else end))
        final = spelled + END_OF_WORD
        if final not in entries:
            entries[final] = (row, end)
            if not continuation:
                whole[final] = spelled  # a word that is this one teacher token
    entries.setdefault(UNKNOWN, (-1, 0.0))
    return entries, whole


def backoff_vector(tokenizer: WordTokenizer, rows: np.ndarray, word: str) -> np.ndarray:
    """swembed's contribution of the unknown ``word`` to a text's weighted sum: its back-off rows times their
    weights (zero when it backs off to nothing)."""
    ids, weights = tokenizer.backoff(word)
    if not ids:
        return np.zeros(rows.shape[1], dtype=np.float32)
    return (np.asarray(weights, dtype=np.float32)[:, None] * rows[ids]).sum(axis=0)


def export_tokenizer(model: StaticEmbedder, vocab: dict[str, int]) -> Tokenizer:
    """The WordPiece tokenizer over ``vocab`` with swembed's normalisation and word split (module doc)."""
    from tokenizers import Regex, Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordPiece

    rules = model.tokenizer.rules
    if rules.word_pattern != WORD_PATTERN:
        raise ValueError(f"this table's word_pattern {rules.word_pattern!r} has no tokenizers spelling (only the "
                         f"default {WORD_PATTERN!r} has); export it as npy")
    teacher = teacher_config(model)
    longest = teacher.get("model", {}).get("max_input_chars_per_word") or 100
    tokenizer = Tokenizer(WordPiece(vocab, unk_token=UNKNOWN, max_input_chars_per_word=longest + len(END_OF_WORD)))
    steps = [getattr(normalizers, rules.unicode_normalization)()] if rules.unicode_normalization else []
    if rules.lowercase:
        steps.append(normalizers.Lowercase())
    word_end = f"(?<={WORD_CHARACTER})(?!{WORD_CHARACTER})"
    if spaces_cjk(model, teacher):  # and around each CJK character, as the teacher splits an unknown word there
        word_end += f"|(?<={CJK_CHARACTER})(?={WORD_CHARACTER})|(?<={WORD_CHARACTER})(?={CJK_CHARACTER})"
    steps.append(normalizers.Replace(Regex(word_end), END_OF_WORD))
    if strips_accents(teacher):  # after the words are marked: a combining mark still ends a word, as in swembed
        steps += [normalizers.NFD(), normalizers.StripAccents()]
    tokenizer.normalizer = normalizers.Sequence(steps)
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(f"{WORD_CHARACTER}+{re.escape(END_OF_WORD)}"),
                                                   behavior="removed", invert=True)
    return tokenizer


def wordpiece_export(model: StaticEmbedder, dtype: str) -> tuple[Tokenizer, np.ndarray]:
    """(the tokenizer, the table with one row per token, weights applied) of an st or model2vec export."""
    entries, whole = export_entries(model)
    rows = model.float_rows()
    tokens = list(entries)
    source = np.array([entries[token][0] for token in tokens], dtype=np.int64)
    weights = np.array([entries[token][1] for token in tokens], dtype=np.float32)
    table = rows[np.maximum(source, 0)] * np.where(source >= 0, weights, 0)[:, None]
    position = {token: i for i, token in enumerate(tokens)}
    for token, word in whole.items():
        table[position[token]] = backoff_vector(model.tokenizer, rows, word)
    return export_tokenizer(model, position), table.astype(dtype)
