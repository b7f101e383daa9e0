"""Stage 2, vocab: the most frequent words of the corpus under the build's tokenisation rules, plus,
optionally, the teacher's whole-word tokens and the words of word lists that the corpus lacks (they get vectors
from being encoded alone).

Artifact: ``vocab.tsv`` (word, corpus count), most frequent first; ``frequencies.tsv`` (every word seen).
"""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path

from swembed.pipeline import files
from swembed.pipeline.config import VocabConfig
from swembed.pipeline.sources import COMPRESSED, CorpusError
from swembed.pipeline.stage import StageContext, StageResult, StageRun, text_digest
from swembed.runtime.settings import stage_key
from swembed.runtime.tokenizer import TokenizationRules, iter_words, normalize_text, word_splitter


def count_words(sentences_path: Path, rules: TokenizationRules, tokenizer_json: str | None = None) -> Counter:
    splitter = word_splitter(rules, tokenizer_json)
    with open(sentences_path, encoding="utf-8") as handle:
        return Counter(iter_words((line.rstrip("\n") for line in handle), splitter))


def teacher_whole_words(tokenizer_json: str, rules: TokenizationRules) -> list[str]:
    """Tokens of a WordPiece/BPE vocabulary that are whole words by the word pattern."""
    from tokenizers import Tokenizer

    tokens = Tokenizer.from_str(tokenizer_json).get_vocab(with_added_tokens=False)
    whole = re.compile(rules.word_pattern)
    words = set()
    for token in tokens:
        token = token.lstrip("Ġ▁")
        if whole.fullmatch(token) and not token.isdigit() and len(token) > 1:
            words.add(token.lower() if rules.lowercase else token)
    return sorted(words)


def read_word_list(path: str) -> bytes:
    """The bytes of a word-list file (decompressed), or one line naming the file and the problem."""
    opener = COMPRESSED.get(Path(path).suffix, open)
    try:
        with opener(path, "rb") as handle:
            return handle.read()
    except (OSError, EOFError) as exc:
        raise CorpusError(f"{path}: cannot read the word list ({getattr(exc, 'strerror', None) or exc})") from None


def listed_words(path: str, data: bytes, rules: TokenizationRules) -> list[str]:
    """The words of a word list (one per line; a tab ends the word), normalised and cased as the corpus is, in
    file order and without repeats; entries the word pattern does not read as one word are left out."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_number = data[: exc.start].count(b"\n") + 1
        raise CorpusError(f"{path}:{line_number}: the word list is not valid UTF-8") from None
    whole = re.compile(rules.word_pattern)
    words: dict[str, None] = {}
    for line in text.splitlines():
        word = normalize_text(line.split("\t", 1)[0].strip(), rules.unicode_normalization)
        word = word.lower() if rules.lowercase else word
        if whole.fullmatch(word):
            words.setdefault(word, None)
    return list(words)


def run_vocab(ctx: StageContext, config: VocabConfig, rules: TokenizationRules, corpus: StageResult,
              tokenizer_json: str) -> StageResult:
    """Stage 2 for one language (its ``rules``; zh/ja keep ``teacher_vocab_size`` words)."""
    cap = config.max_size if rules.words == "pattern" else config.teacher_vocab_size
    add_teacher = config.teacher_words and rules.words == "pattern"
    lists = {path: read_word_list(path) for path in config.word_lists}  # BuildConfig.validate: pattern words only
    identity = {**stage_key(config), "cap": cap, "rules": rules.splitting_only().to_dict(),
                "teacher_vocab": text_digest(tokenizer_json) if add_teacher or rules.words == "teacher" else None}
    if lists:  # absent without lists, so caches from before the option stay valid
        identity["word_lists"] = [hashlib.sha256(data).hexdigest()[:16] for data in lists.values()]

    def compute(run: StageRun) -> dict:
        counts = count_words(corpus.path / files.SENTENCES, rules, tokenizer_json)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        files.write_lines(run.out / files.FREQUENCIES, (f"{w}\t{c}" for w, c in ranked))
        kept = [(w, c) for w, c in ranked if c >= config.min_count][:cap]
        if not kept:
            raise CorpusError(f"no word occurs at least {config.min_count} times in the corpus")
        added, present = [], {w for w, _ in kept}
        if add_teacher:
            added = [w for w in teacher_whole_words(tokenizer_json, rules)
                     if w not in present and counts.get(w, 0) == 0][: max(cap - len(kept), 0)]
        present.update(added)
        listed = [w for path, data in lists.items() for w in listed_words(path, data, rules)
                  if w not in present and counts.get(w, 0) == 0]
        listed = list(dict.fromkeys(listed))[: max(cap - len(kept) - len(added), 0)]  # a word in two lists once
        added += listed
        files.write_lines(run.out / files.VOCAB, [f"{w}\t{c}" for w, c in kept] + [f"{w}\t0" for w in added])
        tokens = sum(counts.values())
        covered = sum(c for _, c in kept)
        return {"distinct_words": len(counts), "corpus_words": len(kept), "listed_words": len(listed),
                "teacher_only_words": len(added) - len(listed),
                "vocab_size": len(kept) + len(added), "token_coverage": round(covered / max(tokens, 1), 5)}

    return ctx.run("vocab", identity, [corpus], compute)


def read_vocab_stage(result: StageResult) -> tuple[list[str], list[int]]:
    """(words, corpus counts) of a vocab artifact."""
    rows = [line.split("\t") for line in files.read_lines(result.path / files.VOCAB)]
    return [w for w, _ in rows], [int(c) for _, c in rows]
