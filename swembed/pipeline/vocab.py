"""Stage 2, vocab: the most frequent words of the corpus (lower-cased for English), plus, optionally,
the teacher's whole-word tokens that the corpus lacks (they get vectors from being encoded alone).

Artifact: ``vocab.tsv`` (word, corpus count), most frequent first; the frequency list is a product.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from swembed.pipeline.corpus import SENTENCES_FILE
from swembed.pipeline.sources import CorpusError
from swembed.pipeline.stage import StageResult, StageRun, run_stage, text_digest
from swembed.runtime.tokenizer import WORD_PATTERN

VOCAB_FILE = "vocab.tsv"
FREQUENCIES_FILE = "frequencies.tsv"


@dataclass
class VocabConfig:
    max_size: int = 150_000
    min_count: int = 1
    lowercase: bool = True
    teacher_words: bool = True  # add the teacher's whole-word tokens missing from the corpus
    words: str = "pattern"  # or "teacher" (the teacher's tokens), "jieba" / "fugashi" (segmenter words): zh/ja


def count_words(sentences_path: Path, lowercase: bool, words: str = "pattern",
                tokenizer_json: str | None = None) -> Counter:
    counts: Counter = Counter()
    if words != "pattern":
        from swembed.pipeline.extract import word_splitter

        splitter = word_splitter(VocabConfig(lowercase=lowercase, words=words), tokenizer_json)
        with open(sentences_path, encoding="utf-8") as handle:
            for line in handle:
                counts.update(w for w, _, _ in splitter.spans(line.rstrip("\n")))
        return counts
    find = re.compile(WORD_PATTERN).findall
    with open(sentences_path, encoding="utf-8") as handle:
        for line in handle:
            counts.update(find(line.lower() if lowercase else line))
    return counts


def teacher_whole_words(tokenizer_json: str, lowercase: bool) -> list[str]:
    """Tokens of a WordPiece/BPE vocabulary that are whole words by our word pattern."""
    from tokenizers import Tokenizer

    tokens = Tokenizer.from_str(tokenizer_json).get_vocab(with_added_tokens=False)
    whole = re.compile(WORD_PATTERN)
    words = set()
    for token in tokens:
        token = token.lstrip("Ġ▁")
        if whole.fullmatch(token) and not token.isdigit() and len(token) > 1:
            words.add(token.lower() if lowercase else token)
    return sorted(words)


def run_vocab(
    config: VocabConfig, corpus: StageResult, teacher_tokenizer_json: str | None, work_dir: Path,
    force: bool = False, quiet: bool = False,
) -> StageResult:
    uses_teacher = config.teacher_words or config.words == "teacher"
    identity = {**asdict(config), "teacher_vocab": text_digest(teacher_tokenizer_json) if uses_teacher else None}
    if config.words == "pattern":  # the default before the option existed: keep earlier caches valid
        del identity["words"]

    def compute(run: StageRun) -> dict:
        counts = count_words(corpus.path / SENTENCES_FILE, config.lowercase, config.words, teacher_tokenizer_json)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        with open(run.out / FREQUENCIES_FILE, "w", encoding="utf-8") as handle:
            handle.writelines(f"{w}\t{c}\n" for w, c in ranked)
        kept = [(w, c) for w, c in ranked if c >= config.min_count][: config.max_size]
        if not kept:
            raise CorpusError(f"no word occurs at least {config.min_count} times in the corpus")
        added = []
        if config.teacher_words and config.words == "pattern" and teacher_tokenizer_json:
            present = {w for w, _ in kept}
            room = config.max_size - len(kept)
            added = [w for w in teacher_whole_words(teacher_tokenizer_json, config.lowercase)
                     if w not in present and counts.get(w, 0) == 0][: max(room, 0)]
        with open(run.out / VOCAB_FILE, "w", encoding="utf-8") as handle:
            handle.writelines(f"{w}\t{c}\n" for w, c in kept)
            handle.writelines(f"{w}\t0\n" for w in added)
        tokens = sum(counts.values())
        covered = sum(c for _, c in kept)
        return {"distinct_words": len(counts), "corpus_words": len(kept), "teacher_only_words": len(added),
                "vocab_size": len(kept) + len(added), "token_coverage": round(covered / max(tokens, 1), 5)}

    return run_stage("vocab", work_dir, identity, [corpus], compute, force=force, quiet=quiet)


def read_vocab(result: StageResult) -> tuple[list[str], list[int]]:
    words, counts = [], []
    with open(result.path / VOCAB_FILE, encoding="utf-8") as handle:
        for line in handle:
            word, count = line.rstrip("\n").split("\t")
            words.append(word)
            counts.append(int(count))
    return words, counts
