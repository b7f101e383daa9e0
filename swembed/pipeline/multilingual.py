"""`swembed build --langs en,de`: one table for several languages (paper 3.3 and appendix A).

Per language the ordinary corpus, vocab and extract stages run on monolingual text (cached like any
build, so English is extracted once for every pair): en/de vocabularies are case-sensitive corpus words;
zh/ja use the teacher's own tokens (the most frequent ``teacher_vocab_size`` in the corpus), as the
paper does. Then ``crosspca`` (one PCA over all languages' sentence vectors, ABTT) and ``contrastive``
(parallel pairs) from ``swembed.pipeline.crosslingual``. The table's rows are grouped by language and its
``config.json`` names each language's rows and tokenisation, for ``encode(texts, lang=...)``.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from swembed.pipeline.build import BuildError, apply_recipe, stage_summary
from swembed.pipeline.corpus import CorpusConfig, run_corpus
from swembed.pipeline.crosslingual import (
    TABLE_FILE,
    ContrastiveConfig,
    CrossPCAConfig,
    loose_key,
    read_parallel,
    run_contrastive,
    run_crosspca,
)
from swembed.pipeline.export import export_model
from swembed.pipeline.extract import ExtractConfig, run_extract
from swembed.pipeline.pca import abtt_drop
from swembed.pipeline.stage import StageResult
from swembed.pipeline.vocab import VocabConfig, read_vocab, run_vocab
from swembed.runtime.folder import update_config
from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer

SPACELESS = ("zh", "ja")


@dataclass
class MultilingualConfig:
    teacher: str = "me5-small"
    langs: list[str] = field(default_factory=lambda: ["en", "de"])
    corpora: dict[str, list[str]] = field(default_factory=dict)
    # english<TAB>other files: a list pairs langs[0] with langs[1]; a table {lang: [files]} pairs langs[0] with
    # each named language (joint training over all of them)
    parallel: list[str] | dict[str, list[str]] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)  # text files whose lines never enter training pairs
    out: str = "models/me5-en-de"
    work_dir: str | None = None
    device: str = "auto"
    seed: int = 0
    vocab_size: int = 50_000  # per space-delimited language
    teacher_vocab_size: int = 30_000  # per zh/ja language: most frequent teacher tokens (or segmenter words)
    segmenters: dict[str, str] = field(default_factory=dict)  # e.g. {zh = "jieba", ja = "fugashi"}: real words
    max_sentences: int | None = 200_000  # per language corpus
    extract: ExtractConfig = field(default_factory=lambda: ExtractConfig(sentences_per_word=10, lowercase=False))
    crosspca: CrossPCAConfig = field(default_factory=CrossPCAConfig)
    contrastive: ContrastiveConfig = field(default_factory=ContrastiveConfig)
    contrastive_enabled: bool = True

    @property
    def work_path(self) -> Path:
        return Path(self.work_dir) if self.work_dir else Path(f"{self.out}.work")

    def validate(self) -> None:
        if len(self.langs) < 2 or len(set(self.langs)) != len(self.langs):
            raise BuildError(f"a multilingual build needs two or more distinct languages, got {self.langs}")
        missing = [lang for lang in self.langs if not self.corpora.get(lang)]
        if missing:
            raise BuildError(f"no monolingual corpus for {', '.join(missing)} (give --corpus LANG=PATH)")
        if self.contrastive_enabled and not self.parallel:
            raise BuildError("contrastive refinement needs parallel pairs (--parallel PATH), or --no-contrastive")
        unknown = [lang for lang in self.parallel_files() if lang not in self.langs[1:]]
        if unknown:
            raise BuildError(f"parallel files for {unknown}, which are not among the other languages {self.langs[1:]}")

    def parallel_files(self) -> dict[str, list[str]]:
        """Pair files per language paired with langs[0]."""
        if isinstance(self.parallel, dict):
            return {lang: list(files) for lang, files in self.parallel.items()}
        return {self.langs[1]: list(self.parallel)} if self.parallel else {}


def load_multilingual_recipe(path: str | Path) -> MultilingualConfig:
    return apply_recipe(MultilingualConfig(), path, ("extract", "crosspca", "contrastive"))


def language_rules(lang: str, segmenter: str | None = None) -> TokenizationRules:
    """en/de: case-sensitive words with teacher-prefix back-off; zh/ja: the teacher's tokens, or a segmenter's
    words (with back-off)."""
    if segmenter:
        return TokenizationRules(lowercase=False, words=segmenter)
    if lang in SPACELESS:
        return TokenizationRules(lowercase=False, words="teacher", oov_backoff="none")
    return TokenizationRules(lowercase=False)


def _language_stages(config: MultilingualConfig, lang: str, teacher, tokenizer_json: str, quiet: bool
                     ) -> tuple[StageResult, StageResult, list[StageResult]]:
    spaceless = lang in SPACELESS
    corpus_config = CorpusConfig(sources=list(config.corpora[lang]), max_sentences=config.max_sentences,
                                 min_words=1 if spaceless else 3, max_words=400 if spaceless else 40,
                                 split_sentences=not spaceless)
    corpus = run_corpus(corpus_config, config.work_path, quiet=quiet)
    words = config.segmenters.get(lang) or ("teacher" if spaceless else "pattern")
    vocab_config = VocabConfig(max_size=config.teacher_vocab_size if spaceless else config.vocab_size,
                               lowercase=False, teacher_words=False, words=words)
    vocab = run_vocab(vocab_config, corpus, tokenizer_json, config.work_path, quiet=quiet)
    extract_config = copy.deepcopy(config.extract)
    extract_config.lowercase, extract_config.words = False, words
    extract_config.seed = config.seed
    extract = run_extract(extract_config, corpus, vocab, teacher, config.work_path, quiet=quiet)
    return vocab, extract, [corpus, vocab, extract]


def _exclusions(paths: list[str]) -> set[str]:
    """Loose keys (``crosslingual.loose_key``) of every line (and tab-separated field) of the given files."""
    keys = set()
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            keys.update(loose_key(part) for part in line.split("\t"))
    keys.discard("")
    return keys


def build_multilingual(config: MultilingualConfig, quiet: bool = False) -> dict:
    """Run every stage and write the model folder; returns the build report."""
    from tokenizers import Tokenizer

    from swembed.teachers import load_teacher

    config.validate()
    started = time.time()
    teacher = load_teacher(config.teacher, device=config.device, batch_size=config.extract.batch_size)
    drop = abtt_drop(teacher.dim, config.crosspca.drop)
    if config.crosspca.dim + drop > teacher.dim:
        raise BuildError(f"--dim {config.crosspca.dim} is too large: the teacher has {teacher.dim} dims and ABTT drops "
                         f"{drop}")
    tokenizer_json = teacher.tokenizer_json()
    pieces = Tokenizer.from_str(tokenizer_json)
    words_by_lang, extracts, stages = {}, {}, []
    for lang in config.langs:
        vocab, extract, done = _language_stages(config, lang, teacher, tokenizer_json, quiet)
        words_by_lang[lang] = read_vocab(vocab)[0]
        extracts[lang] = extract
        stages += [(f"{s.name} ({lang})", s) for s in done]
    offsets = np.cumsum([0] + [len(words_by_lang[lang]) for lang in config.langs])

    def tokenizers(joint: bool):
        def make() -> dict[str, WordTokenizer]:
            out = {}
            for number, lang in enumerate(config.langs):
                base = int(offsets[number]) if joint else 0
                out[lang] = WordTokenizer({w: base + i for i, w in enumerate(words_by_lang[lang])},
                                          language_rules(lang, config.segmenters.get(lang)), pieces)
            return out
        return make

    config.crosspca.seed = config.seed
    crosspca = run_crosspca(config.crosspca, extracts, tokenizers(False), config.work_path, quiet=quiet)
    stages.append(("crosspca", crosspca))
    final = crosspca
    if config.contrastive_enabled:
        excluded = _exclusions(config.exclude)
        pair_sets = {(config.langs[0], lang): read_parallel(files, excluded)
                     for lang, files in config.parallel_files().items()}
        config.contrastive.seed = config.seed
        final = run_contrastive(config.contrastive, crosspca, pair_sets, tokenizers(True), teacher,
                                config.work_path, quiet=quiet)
        stages.append(("contrastive", final))
    table = np.load(final.path / TABLE_FILE)
    words = [w for lang in config.langs for w in words_by_lang[lang]]
    languages = {lang: {"rows": [int(offsets[i]), int(offsets[i + 1])],
                        "tokenization": language_rules(lang, config.segmenters.get(lang)).to_dict()}
                 for i, lang in enumerate(config.langs)}
    summary = stage_summary(stages)
    report = {"teacher": {k: v for k, v in teacher.describe().items() if k != "path"}, "dim": int(table.shape[1]),
              "languages": languages, "tokenization": language_rules(config.langs[0]).to_dict(),
              "swe_version": __import__("swembed").__version__,
              "build": {"config": asdict(config), "stages": summary}}
    export_model(Path(config.out), table, words, tokenizer_json, report, crosspca.path / "pca.npz")
    report["build"]["total_wall_s"] = round(time.time() - started, 2)
    update_config(Path(config.out), {"build": report["build"]})
    return report
