"""The build configuration: one dataclass for any number of languages, read from flags or a TOML recipe.

A recipe (``pipelines/*.toml``) has top-level keys (``teacher``, ``out``, ``langs``, ...) and one table per
section: ``[corpus]``, ``[tokenization]`` (the one rule set every stage and the exported model share),
``[vocab]``, ``[extract]``, ``[compose]``, ``[pca]``, ``[distill]``; a multilingual recipe adds
``[corpora]`` (language -> files) and ``parallel`` pairs. Unknown keys are errors naming the file.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from swembed._extras import require
from swembed.runtime.tokenizer import TokenizationRules
from swembed.teachers.base import TEACHER_DTYPES

SPACELESS = ("zh", "ja")
# script_variants names -> OpenCC configs (to the variant script, back to the corpus's): swembed.pipeline.variants
SCRIPT_CONVERSIONS = {"t2s": ("s2t", "t2s")}


class BuildError(ValueError):
    """The build cannot run as configured."""


@dataclass
class CorpusConfig:
    sources: list[str] = field(default_factory=lambda: ["builtin:wikitext2"])
    text_column: str = "text"
    min_words: int = 3
    max_words: int = 40
    max_sentences: int | None = None
    split_sentences: bool = True


@dataclass
class VocabConfig:
    max_size: int = 150_000
    min_count: int = 1
    teacher_words: bool = True  # add the teacher's whole-word tokens missing from the corpus
    # word-list files (one word per line, .gz too) whose words the corpus lacks are added, in file order, up to
    # max_size; like teacher words they are encoded alone (see [distill] alone_shrinkage)
    word_lists: list[str] = field(default_factory=list)
    teacher_vocab_size: int = 30_000  # zh/ja (teacher tokens or segmenter words): the most frequent ones


@dataclass
class ExtractConfig:
    sentences: str = "all"  # "all": every corpus sentence; "quota": rarest words first, N contexts each
    sentences_per_word: int = 30  # N, the quota of "quota" mode
    max_sentences: int | None = None  # cap on the sentences encoded ("all" mode)
    batch_tokens: int = 8192  # padded tokens per teacher batch (sentences sorted by length)
    unit_sentences: int = 8192  # checkpoint unit
    teacher_dtype: str = "auto"  # auto: bfloat16 on CUDA, float32 on CPU (swembed.teachers.base.pick_dtype)


@dataclass
class ComposeConfig:
    min_contexts: int = 1  # words seen in fewer sentences have no row of their own: their pieces stand in
    shrinkage: float = 0.0  # k: a word seen in n sentences gets (n v_ctx + k v_pieces) / (n + k)
    pieces: bool = True  # keep the teacher's pieces as rows (used by oov_backoff = "pieces" only)
    merge_languages: bool = False  # languages with the same rules share one vocabulary (no language needed)


@dataclass
class PCAConfig:
    dim: int = 256
    drop: int | None = None  # None: floor(H / 100), the paper's rule; 0 disables ABTT
    sentences: int = 100_000  # per language
    level: str = "sentence"  # "sentence", "word", or "none" (the extracted table as it is: an ablation)


@dataclass
class DistillConfig:
    """The refine stage: knowledge distillation on each language's sentences, plus (multilingual) the
    contrastive loss on parallel pairs, in one loop with one early stopping rule."""

    batch_size: int = 128
    tau: float = 0.05
    lr: float = 1e-3
    max_steps: int = 100_000
    eval_every: int = 250
    patience: int = 10  # rounds; sparse updates make the validation loss noisy
    val_sentences: int = 5_000  # per language
    max_sentences: int | None = None  # KD on at most this many sentences per language (None: all encoded)
    kd_weight: float = 1.0
    contrastive_weight: float = 1.0
    held_out_pairs: int = 2_000  # per language pair
    max_pairs: int | None = None
    min_teacher_similarity: float | None = None  # drop parallel pairs the teacher scores below this
    cell_size: int = 0  # KD batches from k-means cells of about this many sentences; 0: random (the paper)
    # KD towards the teacher's vectors minus their mean, re-normalised: for anisotropic teachers (e5: random
    # sentence pairs score ~0.8), whose flat in-batch softmax otherwise pulls the table apart
    center_targets: bool = False
    # KD also sees each sentence holding a word of at most this many contexts with that word written through its
    # pieces (the inference back-off), so piece rows learn to compose; 0: off (then piece rows keep their means)
    rare_word_pieces: int = 0
    # with cell_size: each KD objective also takes a random batch every step at this weight (neighbour batches teach
    # the fine ranking, random ones keep the global layout; held out on the neighbour batches); 0: off
    random_batch_weight: float = 0.0
    # after training, a word seen in n sentences becomes (n v + k u) / (n + k), u its trained piece composition
    # (what the tokeniser gives it were it unknown); 0: off
    shrinkage: float = 0.0
    # then a word seen in n sentences becomes (n v + k a) / (n + k), a the teacher's vector of the word encoded
    # alone, mapped into the table by a ridge fit on frequent words (swembed.pipeline.alone); 0: off
    alone_shrinkage: float = 0.0
    # other teachers whose sentence similarities KD also aims at, each at its weight in standard units (a name or a
    # list of names, and a weight or one per name; swembed.pipeline.coteacher); "": off
    co_teacher: str | list[str] = ""
    co_teacher_weight: float | list[float] = 0.5
    # after training, this many gram rows (character 3-5-grams hashed into buckets) fitted to the word rows, so an
    # unknown word backs off to the mean of its pieces and its grams (swembed.pipeline.grams); 0: pieces only
    gram_buckets: int = 0

    def co_teachers(self) -> list[tuple[str, float]]:
        """(name, weight) of each co-teacher."""
        names = [self.co_teacher] if isinstance(self.co_teacher, str) else list(self.co_teacher)
        weights = self.co_teacher_weight if isinstance(self.co_teacher_weight, list) else [self.co_teacher_weight]
        names = [name for name in names if name]
        if not all(isinstance(name, str) for name in names) or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights):
            raise BuildError(f"co_teacher takes names and co_teacher_weight numbers, got {self.co_teacher!r} and "
                             f"{self.co_teacher_weight!r}")
        if names and len(weights) != len(names):
            raise BuildError(f"co_teacher_weight needs one weight per co-teacher: {len(names)} names, "
                             f"{len(weights)} weights")
        return list(zip(names, weights))


@dataclass
class BuildConfig:
    teacher: str = "minilm"
    out: str = "models/minilm-256"
    work_dir: str | None = None  # default: <out>.work
    device: str = "auto"
    dtype: str = "float32"
    seed: int = 0
    langs: list[str] = field(default_factory=lambda: ["en"])
    corpora: dict[str, list[str]] = field(default_factory=dict)  # multilingual: language -> sources
    segmenters: dict[str, str] = field(default_factory=dict)  # e.g. {zh = "jieba", ja = "fugashi"}
    # language -> conversion: rows for the words of another script, copied from the corpus's spelling after
    # distillation (swembed.pipeline.variants); zh tables read traditional characters unless set to {}
    script_variants: dict[str, str] = field(default_factory=lambda: {"zh": "t2s"})
    # english<TAB>other files: a list pairs langs[0] with langs[1]; a table {lang: [files]} pairs langs[0] with each
    parallel: list[str] | dict[str, list[str]] = field(default_factory=list)
    # held-out text (files, folders; e.g. the evaluation sets): no corpus sentence or training pair repeats a line
    # or tab-separated field of it (compared without case, spaces and punctuation)
    exclude: list[str] = field(default_factory=list)
    distill_enabled: bool = True
    lexicon_top_k: int | None = None  # keep each word's k largest dims (lexicon tables, e.g. from LENS)
    checkpoint_seconds: float = 60.0
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    tokenization: TokenizationRules = field(default_factory=lambda: TokenizationRules(oov_backoff="pieces"))
    vocab: VocabConfig = field(default_factory=VocabConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    compose: ComposeConfig = field(default_factory=ComposeConfig)
    pca: PCAConfig = field(default_factory=PCAConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)

    @property
    def work_path(self) -> Path:
        return Path(self.work_dir) if self.work_dir else Path(f"{self.out}.work")

    @property
    def multilingual(self) -> bool:
        return len(self.langs) > 1

    def rules(self, lang: str) -> TokenizationRules:
        """The tokenisation rules of one language: the recipe's, except that zh/ja use the teacher's tokens as
        words (or a segmenter's words, when one is named). A teacher token without a word row backs off to its
        piece row, which exists when another language's corpus has it (a Latin name inside Chinese text)."""
        if lang in self.segmenters:
            return replace(self.tokenization, words=self.segmenters[lang])
        if lang in SPACELESS:
            return replace(self.tokenization, words="teacher")
        return self.tokenization

    def corpus_for(self, lang: str) -> CorpusConfig:
        """The corpus settings of one language (zh/ja lines are sentences already and have no word count)."""
        sources = self.corpora.get(lang) if self.multilingual else None
        config = replace(self.corpus, sources=list(sources)) if sources else self.corpus
        if lang in SPACELESS:
            config = replace(config, min_words=1, max_words=400, split_sentences=False)
        return config

    def parallel_files(self) -> dict[str, list[str]]:
        """Pair files per language paired with langs[0]."""
        if isinstance(self.parallel, dict):
            return {lang: list(files) for lang, files in self.parallel.items()}
        return {self.langs[1]: list(self.parallel)} if self.parallel and self.multilingual else {}

    def validate(self) -> None:
        if not self.langs or len(set(self.langs)) != len(self.langs):
            raise BuildError(f"languages must be distinct, got {self.langs}")
        if self.multilingual:
            missing = [lang for lang in self.langs if not self.corpora.get(lang)]
            if missing:
                raise BuildError(f"no monolingual corpus for {', '.join(missing)} (give --corpus LANG=PATH)")
            unknown = [lang for lang in self.parallel_files() if lang not in self.langs[1:]]
            if unknown:
                raise BuildError(f"parallel files for {unknown}, which are not among the other languages "
                                 f"{self.langs[1:]}")
        elif self.parallel or self.corpora:
            raise BuildError("--parallel and per-language corpora need two or more languages (--langs)")
        if self.vocab.word_lists and (self.multilingual or self.rules(self.langs[0]).words != "pattern"):
            raise BuildError("--word-lists ([vocab] word_lists) is for one-language builds split by the word pattern "
                             "(its words would join every language's vocabulary; zh/ja words come from the teacher)")
        for lang, name in self.script_variants.items():
            if name not in SCRIPT_CONVERSIONS:
                raise BuildError(f"script_variants: {lang} = {name!r} is not one of {sorted(SCRIPT_CONVERSIONS)}")
            if lang in self.langs:
                require("multilingual", "opencc")
        if self.dtype not in ("float32", "float16"):
            raise BuildError(f"--dtype must be float32 or float16, got {self.dtype!r}")
        if self.extract.teacher_dtype not in TEACHER_DTYPES:
            raise BuildError(f"--teacher-dtype must be one of {', '.join(TEACHER_DTYPES)}, got "
                             f"{self.extract.teacher_dtype!r}")
        if self.extract.sentences not in ("all", "quota"):
            raise BuildError(f"extract sentences must be 'all' or 'quota', got {self.extract.sentences!r}")
        if self.pca.level not in ("sentence", "word", "none"):
            raise BuildError(f"--pca-level must be sentence, word or none, got {self.pca.level!r}")
        positive = {"--dim": self.pca.dim, "--min-words": self.corpus.min_words, "--vocab-size": self.vocab.max_size,
                    "--min-count": self.vocab.min_count, "--sentences-per-word": self.extract.sentences_per_word,
                    "--batch-tokens": self.extract.batch_tokens, "--unit-sentences": self.extract.unit_sentences,
                    "--pca-sentences": self.pca.sentences, "--distill-steps": self.distill.max_steps,
                    "--eval-every": self.distill.eval_every, "--distill-batch-size": self.distill.batch_size}
        for flag, value in positive.items():
            if value < 1:
                raise BuildError(f"{flag} must be at least 1, got {value}")
        if self.corpus.max_words < self.corpus.min_words:
            raise BuildError(f"--max-words {self.corpus.max_words} is below --min-words {self.corpus.min_words}")
        if self.pca.drop is not None and self.pca.drop < 0:
            raise BuildError(f"--abtt-drop must be 0 or more, got {self.pca.drop}")
        if min(self.distill.kd_weight, self.distill.contrastive_weight, self.distill.random_batch_weight) < 0:
            raise BuildError("--kd-weight, --contrastive-weight and random_batch_weight must be 0 or more")
        if self.distill.random_batch_weight and not self.distill.cell_size:
            raise BuildError("random_batch_weight needs cell_size (without neighbour cells every batch is random)")
        if (min(self.compose.shrinkage, self.distill.shrinkage, self.distill.alone_shrinkage) < 0
                or self.compose.min_contexts < 1):
            raise BuildError("compose and distill shrinkage (and alone_shrinkage) must be >= 0 and min_contexts >= 1")
        if self.distill.gram_buckets < 0:
            raise BuildError(f"gram_buckets must be 0 (no gram rows) or more, got {self.distill.gram_buckets}")
        co_weights = [weight for _, weight in self.distill.co_teachers()]
        if co_weights and not (min(co_weights) > 0 and sum(co_weights) < 1):
            raise BuildError(f"co_teacher_weight must be above 0 and sum to below 1 (the teacher keeps the rest), got "
                             f"{self.distill.co_teacher_weight}")

    def check_before_work(self, overwrite: bool = False) -> None:
        """What a build can check before loading the teacher (and before importing torch): the settings, the
        output folder, and that every corpus source (and word list) exists and starts like text."""
        from swembed.pipeline.sources import check_sources
        from swembed.runtime.folder import check_writable

        self.validate()
        check_writable(Path(self.out), overwrite)
        for lang in self.langs:
            check_sources(self.corpus_for(lang).sources)
        check_sources(self.exclude)
        for path in self.vocab.word_lists:
            if not Path(path).expanduser().is_file():
                raise BuildError(f"word list not found: {path} (--word-lists / [vocab] word_lists)")
        check_sources(self.vocab.word_lists)  # a binary word list fails here too


SECTIONS = {f.name: f.type for f in fields(BuildConfig) if f.name in
            ("corpus", "tokenization", "vocab", "extract", "compose", "pca", "distill")}


_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "None": type(None), "list": list, "dict": dict}


def _check_types(source: str, where: str, annotations: dict[str, str], values: dict) -> None:
    """Each value has its field's declared type (the outer type: ``list[str]`` checks for a list), so a
    recipe's ``dim = "x"`` is an error naming the file and key, not a TypeError in some stage."""
    for key, value in values.items():
        kinds = [kind.strip().split("[")[0] for kind in annotations[key].split("|")]
        if not any(isinstance(value, _TYPES[kind]) and not (kind in ("int", "float") and isinstance(value, bool))
                   for kind in kinds):
            raise BuildError(f"{source}: {where}{key} must be {annotations[key]}, got {value!r}")


def apply_settings(config: BuildConfig, settings: dict, source: str) -> BuildConfig:
    """Set ``config``'s fields from a recipe-shaped dict (top-level keys and section tables)."""
    top = {f.name: f.type for f in fields(config)}
    for key, value in settings.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise BuildError(f"{source}: [{key}] must be a table")
            section = getattr(config, key)
            unknown = set(value) - {f.name for f in fields(section)}
            if unknown:
                raise BuildError(f"{source}: unknown keys in [{key}]: {sorted(unknown)}")
            _check_types(source, f"[{key}] ", {f.name: f.type for f in fields(section)}, value)
            try:
                setattr(config, key, replace(section, **value))
            except (TypeError, ValueError) as exc:
                raise BuildError(f"{source}: [{key}]: {exc}") from None
        elif key in top:
            _check_types(source, "", top, {key: value})
            setattr(config, key, value)
        elif key not in ("name", "description"):
            raise BuildError(f"{source}: unknown key {key!r}")
    return config


def load_recipe(path: str | Path, _seen: tuple[Path, ...] = ()) -> BuildConfig:
    """A build from a TOML recipe in ``pipelines/``. ``base = "other.toml"`` (a path from the recipe's folder)
    starts from that recipe; this one's keys then replace its keys, one by one within a section."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"recipe not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BuildError(f"{path}: not a valid TOML recipe ({exc})") from None
    base = data.pop("base", None)
    _check_types(str(path), "", {"base": "str | None"}, {"base": base})
    if base is None:
        return apply_settings(BuildConfig(), data, str(path))
    base_path, seen = path.parent / base, (*_seen, path.resolve())
    if base_path.resolve() in seen:
        raise BuildError(f"{path}: base {base!r} leads back to this recipe")
    if not base_path.is_file():
        raise BuildError(f"{path}: base recipe not found: {base_path} (a path from the recipe's folder)")
    return apply_settings(load_recipe(base_path, seen), data, str(path))
