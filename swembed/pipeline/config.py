"""The build configuration: one dataclass for any number of languages, read from flags or a TOML recipe.

A recipe (``pipelines/*.toml``) has top-level keys (``teacher``, ``out``, ``langs``, ...) and one table per
section: ``[corpus]``, ``[tokenization]`` (the one rule set every stage and the exported model share),
``[vocab]``, ``[extract]``, ``[compose]``, ``[pca]``, ``[distill]``, and one per post-training stage:
``[coteacher]``, ``[paragraphs]``, ``[shrinkage]``, ``[alone]``, ``[grams]``, then ``[query_weights]`` and
``[lexical_weights]`` on the written table (older keys, such as their
``[distill]`` keys, still load with a one-line warning: ``OLDER_KEYS``); a multilingual recipe adds ``[corpora]``
(language -> files) and ``parallel`` pairs.
Unknown keys are errors naming the file; every numeric setting is checked against its range (``RANGES``).
The CLI (flags, ``--recipe``) and ``swembed.build`` both make a ``BuildConfig`` and hand it to the pipeline.
"""
from __future__ import annotations

import logging
import re
from copy import deepcopy
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import cast

from swembed._extras import require
from swembed.pipeline.splits import SplitsConfig, make_splits
from swembed.runtime.compat import tomllib
from swembed.runtime.ranges import Range
from swembed.runtime.settings import Key, declaration, default_of, flag_name, setting, walk
from swembed.runtime.tokenizer import TokenizationRules
from swembed.teachers.base import TEACHER_DTYPES, TEACHER_RUNTIMES, onnx_runtime_available

SPACELESS = ("zh", "ja")
# script_variants names -> OpenCC configs (to the variant script, back to the corpus's): swembed.pipeline.variants
SCRIPT_CONVERSIONS = {"t2s": ("s2t", "t2s")}
logger = logging.getLogger(__name__)


class BuildError(ValueError):
    """The build cannot run as configured."""


S = Key.ALWAYS  # a short name for the common case: the value enters its stage's cache key as it is


@dataclass
class CorpusConfig:
    sources: list[str] = setting(key=Key.BY_STAGE, factory=lambda: ["builtin:wikitext2"])  # keyed by their contents
    text_column: str = setting("text", key=S, flag=True, metavar="COLUMN",
                               help="text field of .jsonl/.parquet/hf: corpora")
    min_words: int = setting(3, key=S, within=Range(1), flag=True, help="shortest sentence kept, in words")
    max_words: int = setting(40, key=S, within=Range(1), flag=True, help="longest sentence kept, in words")
    max_sentences: int | None = setting(None, key=S, within=Range(1, unset="no limit"), flag=True,
                                        help="stop reading the corpus after this many")
    split_sentences: bool = setting(True, key=S)


@dataclass
class VocabConfig:
    max_size: int = setting(150_000, key=S, within=Range(1), flag="--vocab-size", help="vocabulary cap")
    min_count: int = setting(1, key=S, within=Range(1), flag=True, help="keep words seen at least this often")
    # add the teacher's whole-word tokens missing from the corpus
    teacher_words: bool = setting(True, key=S, flag=True, help="do not add the teacher's whole-word tokens")
    # word-list files (one word per line, .gz too) whose words the corpus lacks are added, in file order, up to
    # max_size; like teacher words they are encoded alone (see [distill] alone_shrinkage); keyed by their contents
    word_lists: list[str] = setting(key=Key.BY_STAGE, factory=list, flag=True, metavar="FILE",
                                    help="word-list files (one word per line): their words the corpus lacks join the "
                                         "vocabulary")
    # zh/ja (teacher tokens or segmenter words): the most frequent ones
    teacher_vocab_size: int = setting(30_000, key=S, within=Range(1))


EXTRACT_SENTENCES = ("all", "quota", "cover")
QUOTA_CHOICES = ("quota", "cover")  # the sentence choices a quota makes (swembed.pipeline.extract.choose_sentences)
TABLE_DTYPES = ("float32", "float16")
DEVICES = ("auto", "cpu", "cuda")
PCA_LEVELS = ("sentence", "word", "none")
RETRIEVAL_LOSSES = ("kd", "contrastive")
RETRIEVAL_DIRECTIONS = ("both", "query")
LR_DECAYS = ("none", "linear", "cosine")
CELL_DRAWS = ("hashed", "sampled")


@dataclass
class ExtractConfig:
    # "all": every corpus sentence; "quota": rarest words first, N contexts each; "cover": the quota's sentences,
    # every word in them credited (swembed.pipeline.extract)
    sentences: str = setting("all", key=S, choices=EXTRACT_SENTENCES, flag=True,
                             help="encode every corpus sentence, a quota per word (rarest first), or the quota's "
                                  "sentences with every word in them credited")
    sentences_per_word: int = setting(30, key=S, within=Range(1), flag=True, help="the quota N")
    # sentences encoded: "all" samples this many, "cover" is cut or filled to it
    max_sentences: int | None = setting(None, key=S, within=Range(1, unset="every sentence"),
                                        flag="--encode-sentences",
                                        help="sentences the teacher encodes: a sample of all, or the cover cut or "
                                             "filled at random to this many")
    # "cover" filled to max_sentences: only with sentences of at most this many words
    fill_max_words: int | None = setting(None, key=Key.UNLESS_DEFAULT, within=Range(1, unset="any length"))
    # ... and only with sentences of these corpus sources
    fill_sources: list[str] = setting(key=Key.UNLESS_DEFAULT, factory=list)
    # "quota"/"cover": read each chosen sentence as the window from this many words before the first word it was
    # chosen for to as many after the last (issue 80: fewer teacher tokens); the fill stays whole
    window: int | None = setting(None, key=Key.UNLESS_DEFAULT, within=Range(1, unset="whole sentences"))
    # padded tokens per teacher batch (sentences sorted by length); unset: by device, 1,024 on a CPU and 8,192 on a
    # GPU (swembed.teachers.base.pick_batch_tokens); the key holds the number that ran
    batch_tokens: int | None = setting(None, key=Key.BY_STAGE, within=Range(1, unset="1024 on a CPU, 8192 on a GPU"),
                                       flag=True, help="padded tokens per teacher batch")
    unit_sentences: int = setting(8192, key=Key.NEVER, within=Range(1), flag=True, help="extract checkpoint unit")
    # auto: bfloat16 on CUDA or a CPU with native bfloat16, else float32 (pick_dtype); int8: the teacher's linear
    # layers quantised by ONNX Runtime on a CPU (swembed.teachers.onnx_runtime)
    teacher_dtype: str = setting("auto", key=S, choices=TEACHER_DTYPES, flag=True,
                                 help="teacher weights (auto: bfloat16 on CUDA and on CPUs with AVX512-BF16 or AMX, "
                                      "else float32; SWEMBED_NATIVE_BF16=0 or 1 overrides the CPU flags; int8: ONNX "
                                      "Runtime's dynamic quantisation on a CPU)")
    # auto: ONNX Runtime for a float32 teacher on a CPU where installed (pick_runtime)
    teacher_runtime: str = setting("auto", key=S, choices=TEACHER_RUNTIMES, flag=True,
                                   help="what runs the teacher (auto: ONNX Runtime for a float32 teacher on a CPU "
                                        "where it is installed, else torch)")


@dataclass
class ComposeConfig:
    # words seen in fewer sentences have no row of their own: their pieces stand in
    min_contexts: int = setting(1, key=S, within=Range(1), flag=True,
                                help="words seen in fewer sentences go through their pieces")
    # k: a word seen in n sentences gets (n v_ctx + k v_pieces) / (n + k), before training (the [shrinkage] stage
    # does the same after training, with the trained pieces); "shrinkage" in the key, as it has always been
    piece_prior: float = setting(0.0, key=S, key_name="shrinkage", within=Range(0), flag=True, metavar="K",
                                 older_flags=("--shrinkage",),
                                 help="k of (n v_ctx + k v_pieces)/(n + k) before training")
    # keep the teacher's pieces as rows (used by oov_backoff = "pieces" only)
    pieces: bool = setting(True, key=S, flag=True, help="no piece rows")
    merge_languages: bool = setting(False, key=S)  # languages with the same rules share one vocabulary


@dataclass
class PCAConfig:
    dim: int = setting(256, key=S, within=Range(1), flag=True, help="output dimension d'")
    # None: floor(H / 100), the paper's rule; 0 disables ABTT
    drop: int | None = setting(None, key=S, within=Range(0, unset="floor(teacher dim / 100)"), flag="--abtt-drop",
                               help="top components dropped (ABTT)")
    sentences: int = setting(100_000, key=S, within=Range(1), flag="--pca-sentences",
                             help="sentences M for the PCA")  # per language
    # "sentence", "word", or "none" (the extracted table as it is: an ablation)
    level: str = setting("sentence", key=S, choices=PCA_LEVELS, flag="--pca-level",
                         help="fit PCA on sentences or words; none keeps the table")
    # fit on the encoded sentences of these corpus sources only (files, folders or globs, as [corpus] sources names
    # them): e.g. the general text, while the words' contexts also come from a special domain's; []: all of them
    sources: list[str] = setting(key=Key.UNLESS_DEFAULT, factory=list)


@dataclass
class DistillConfig:
    """The refine stage: knowledge distillation on each language's sentences, plus (multilingual) the
    contrastive loss on parallel pairs, in one loop with one early stopping rule."""

    batch_size: int = setting(128, key=S, within=Range(1), flag="--distill-batch-size", help="sentences per KD batch")
    tau: float = setting(0.05, key=S, within=Range(0, above=True))
    # 16,000 steps at 2e-3 decaying to zero (cosine): the default build's budget (issue 80), which scores as 33,750
    # early-stopped steps at a constant 1e-3 did (reports/build-times.md); menu recipes name their own
    lr: float = setting(2e-3, key=S, within=Range(0, above=True))
    max_steps: int = setting(16_000, key=S, within=Range(1), flag="--distill-steps", help="maximum training steps")
    # the step size over max_steps: "none" keeps lr; "linear" and "cosine" take it to zero at max_steps, for a
    # recipe whose build budget stops training before early stopping would
    lr_decay: str = setting("cosine", key=Key.UNLESS_DEFAULT, choices=LR_DECAYS, keyless="none")
    eval_every: int = setting(250, key=S, within=Range(1), flag=True, help="steps between validation rounds")
    patience: int = setting(10, key=S, within=Range(1))  # rounds; sparse updates make the validation loss noisy
    val_sentences: int = setting(5_000, key=S, within=Range(2))  # per language; a held-out loss needs two sentences
    # KD on at most this many sentences per language (None: all encoded)
    max_sentences: int | None = setting(None, key=S, within=Range(1, unset="every encoded sentence"),
                                        flag="--kd-sentences", help="distil on at most this many sentences")
    kd_weight: float = setting(1.0, key=S, within=Range(0), flag=True, help="weight of the distillation loss")
    contrastive_weight: float = setting(1.0, key=S, within=Range(0), flag=True,
                                        help="weight of the contrastive loss on parallel pairs")
    held_out_pairs: int = setting(2_000, key=S, within=Range(1))  # per language pair
    max_pairs: int | None = setting(None, key=S, within=Range(1, unset="every pair"))
    # drop parallel pairs the teacher scores below this
    min_teacher_similarity: float | None = setting(None, key=S, within=Range(-1, 1, unset="no filter"))
    # KD batches from k-means cells of about this many sentences; 0: random (the paper)
    cell_size: int = setting(0, key=S, within=Range(0))
    # KD towards the teacher's vectors minus their mean, re-normalised: for anisotropic teachers (e5: random
    # sentence pairs score ~0.8), whose flat in-batch softmax otherwise pulls the table apart
    center_targets: bool = setting(False, key=Key.UNLESS_DEFAULT)
    # KD also sees each sentence holding a word of at most this many contexts with that word written through its
    # pieces (the inference back-off), so piece rows learn to compose; 0: off (then piece rows keep their means)
    rare_word_pieces: int = setting(0, key=Key.UNLESS_DEFAULT, within=Range(0))
    # with cell_size: each KD objective also takes a random batch every step at this weight (neighbour batches teach
    # the fine ranking, random ones keep the global layout; held out on the neighbour batches); 0: off
    random_batch_weight: float = setting(0.0, key=Key.UNLESS_DEFAULT, within=Range(0))
    # KD on the encoded sentences of these corpus sources only (as [pca] sources); []: all of them
    sources: list[str] = setting(key=Key.UNLESS_DEFAULT, factory=list)
    # how batches are drawn from cells (cell_size here or in [retrieval]): "hashed": each step takes the cell of a
    # uniformly drawn example and its members of smallest seeded hash, cells fitted in float64, so another CPU's
    # rounding leaves the table as it is (rows within 1e-5); "sampled": cells drawn by size and members at random
    # from float32 cells, what tables built before 2026-12-06 ran (a few rows change cell under another CPU's
    # rounding and every later batch of those cells changes: rows move ~0.01). Keyed by the distill stage where
    # cells are used, and only as "hashed" (caches from before it stay valid)
    cell_draws: str = setting("hashed", key=Key.BY_STAGE, choices=CELL_DRAWS)


# The post-training stages, one section each (``swembed.pipeline.post`` registers what each one runs); the names
# their settings have in the distill stage's key are the [distill] keys they had before they had sections.
@dataclass
class CoTeacherConfig:
    """Other teachers whose sentence similarities KD also aims at, each at its weight in standard units (a name or
    a list of names, and a weight or one per name; ``swembed.pipeline.coteacher``); "": off."""

    teachers: str | list[str] = setting("", key=S, key_name="co_teacher")
    weights: float | list[float] = setting(0.5, key=S, key_name="co_teacher_weight")  # BuildConfig.validate

    def pairs(self) -> list[tuple[str, float]]:
        """(name, weight) of each co-teacher."""
        names = [self.teachers] if isinstance(self.teachers, str) else list(self.teachers)
        weights = self.weights if isinstance(self.weights, list) else [self.weights]
        names = [name for name in names if name]
        if not all(isinstance(name, str) for name in names) or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights):
            raise BuildError(f"[coteacher] teachers takes names and weights numbers, got {self.teachers!r} and "
                             f"{self.weights!r}")
        if names and len(weights) != len(names):
            raise BuildError(f"[coteacher] weights needs one weight per co-teacher: {len(names)} names, "
                             f"{len(weights)} weights")
        return list(zip(names, weights))


@dataclass
class ParagraphsConfig:
    """KD also on paragraphs: ``count`` runs of ``sentences`` consecutive corpus lines (one document, mostly), read
    by the teacher as one text (truncated as it truncates), at ``weight`` beside the sentence objectives, so the
    table learns what a long text's vector looks like; and at ``query_weight`` the asymmetric KD of a query (the
    corpus line just before each run) against the batch's paragraphs, so it learns what a short text matching a
    long one looks like (``swembed.pipeline.paragraphs``). With ``files`` (one document a line: an abstract, a
    passage), the paragraphs are ``count`` documents drawn from them instead (evaluation text excluded): the
    document-level targets of tokenlearn. Early stopping reads the sentence objectives only. count = 0: off."""

    count: int = setting(0, key=S, key_name="paragraphs", within=Range(0))
    sentences: int = setting(4, key=S, key_name="paragraph_sentences", within=Range(1))
    files: list[str] = setting(key=Key.BY_STAGE, factory=list)  # keyed by how many, the prepared stage by contents
    weight: float = setting(0.5, key=S, key_name="paragraph_weight", within=Range(0))
    query_weight: float = setting(0.0, key=Key.UNLESS_DEFAULT, key_name="paragraph_query_weight", within=Range(0))


@dataclass
class RetrievalConfig:
    """Retrieval supervision: ``query<TAB>document`` pairs from ``files`` (a title and its body, a question and
    its answer; evaluation text excluded; further tab-separated fields ignored, as in parallel files), trained
    at ``weight`` beside the sentence objectives so the table learns which long texts a short one should find
    (``swembed.pipeline.retrieval``). ``loss``: ``"kd"``, the teacher's softmax of each query over the batch's
    documents distilled (as ``[paragraphs] query_weight``), or ``"contrastive"``, each query's own document as the
    label (in-batch InfoNCE, both directions). ``max_pairs`` caps the pairs; ``batch_size``: pairs a step (unset:
    ``[distill] batch_size``). ``windows`` (contrastive): score each passage as a search with windows of this many
    words does (its cosine plus ``windows.GAMMA`` times its best window's); unset: its cosine. ``cell_size``
    (contrastive): draw each
    batch from one k-means cell of about this many pairs, clustered by their words (``train.lexical_sketches``), so
    the other pairs of a batch are hard negatives; 0: random batches. ``tau``: the pairs' softmax temperature (unset:
    ``[distill] tau``). ``directions`` (contrastive): ``"both"``, each query picks its passage and each passage its
    query, or ``"query"``, the query side only (what a search asks). ``mask_siblings`` (contrastive): pairs whose
    texts share a sentence (``retrieval.sibling_groups``: two pseudo-queries of one abstract) are no negatives of
    each other. ``hard_negatives`` (contrastive, whole passages): mine this many negatives a pair with the table
    distillation starts from (the passages of training pairs nearest its query, siblings left out:
    ``train.mine_negatives``), and let each query also score one of them a step; 0: the batch's passages only.
    Early stopping reads the sentence objectives only. No files: off."""

    files: list[str] = setting(key=Key.BY_STAGE, factory=list)  # keyed by the prepared stage's contents
    weight: float = setting(1.0, key=S, key_name="retrieval_weight", within=Range(0))
    loss: str = setting("kd", key=S, key_name="retrieval_loss", choices=RETRIEVAL_LOSSES)
    max_pairs: int | None = setting(None, key=Key.UNLESS_DEFAULT, key_name="retrieval_max_pairs",
                                    within=Range(1, unset="every pair"))
    cell_size: int = setting(0, key=Key.UNLESS_DEFAULT, key_name="retrieval_cell_size", within=Range(0))
    batch_size: int | None = setting(None, key=Key.UNLESS_DEFAULT, key_name="retrieval_batch_size",
                                     within=Range(2, unset="[distill] batch_size"))
    windows: int | None = setting(None, key=Key.UNLESS_DEFAULT, key_name="retrieval_windows",
                                  within=Range(2, unset="whole passages"))
    tau: float | None = setting(None, key=Key.UNLESS_DEFAULT, key_name="retrieval_tau",
                                within=Range(0, 10, above=True, unset="[distill] tau"))
    directions: str = setting("both", key=Key.UNLESS_DEFAULT, key_name="retrieval_directions",
                              choices=RETRIEVAL_DIRECTIONS)
    mask_siblings: bool = setting(False, key=Key.UNLESS_DEFAULT, key_name="retrieval_mask_siblings")
    hard_negatives: int = setting(0, key=Key.UNLESS_DEFAULT, key_name="retrieval_hard_negatives", within=Range(0))

    def needs_teacher(self) -> bool:
        """Whether the pairs need the teacher's vectors: ``kd`` distils them; ``contrastive``'s labels are the pairs."""
        return self.loss != "contrastive"


@dataclass
class ShrinkageConfig:
    """After training, a word seen in n sentences becomes (n v + k u) / (n + k), u its trained piece composition
    (what the tokeniser gives it were it unknown; ``swembed.pipeline.shrinkage``); k = 0: off."""

    k: float = setting(1.0, key=S, key_name="shrinkage", within=Range(0))  # the default build's (issue 80)


@dataclass
class AloneConfig:
    """After training (and shrinkage), a word seen in n sentences becomes (n v + k a) / (n + k), a the teacher's
    vector of the word encoded alone, mapped into the table by a ridge fit on frequent words
    (``swembed.pipeline.alone``); k = 0: off."""

    k: float = setting(10.0, key=S, key_name="alone_shrinkage", within=Range(0))  # the default build's (issue 80)


@dataclass
class QueryWeightsConfig:
    """After the model folder is written, one weight per row for search queries (``encode(kind="query")``), fitted
    on the ``query<TAB>passage`` pairs of ``files`` with the rows frozen: in-batch InfoNCE at ``tau`` over each
    query's passage, the batch's and ``negatives`` hard negatives a query mined with the table, ``l2`` on the log
    weights, ``epochs`` passes in batches of ``batch_size`` at Adam's ``lr``; a row in fewer than ``min_queries``
    training queries keeps weight 1 (``swembed.pipeline.query_weights``).
    No files: off."""

    files: list[str] = setting(key=Key.BY_STAGE, factory=list)  # keyed by their contents
    tau: float = setting(0.05, key=S, within=Range(0, 10, above=True))
    l2: float = setting(1.0, key=S, within=Range(0))
    negatives: int = setting(4, key=S, within=Range(0, 256))
    epochs: int = setting(2, key=S, within=Range(1, 100))
    batch_size: int = setting(256, key=S, within=Range(2, 65536))
    lr: float = setting(0.05, key=S, within=Range(0, 10, above=True))
    min_queries: int = setting(1, key=S, within=Range(1))


@dataclass
class LexicalWeightsConfig:
    """After the model folder is written, one weight per word row multiplying its term's BM25 weight in a search
    query (hybrid and lexical search), fitted on the ``query<TAB>passage`` pairs of ``files``: cross-entropy of each
    query's passage against its ``negatives`` BM25-mined ones, ``l2`` on the weights' logits, ``epochs`` passes in
    batches of ``batch_size`` at Adam's ``lr`` (``swembed.pipeline.lexical_weights``). No files: off."""

    files: list[str] = setting(key=Key.BY_STAGE, factory=list)  # keyed by their contents
    l2: float = setting(1e-4, key=S, within=Range(0))  # chosen on the dev pairs (reports/mteb.md)
    negatives: int = setting(15, key=S, within=Range(1, 256))
    epochs: int = setting(3, key=S, within=Range(1, 100))
    batch_size: int = setting(512, key=S, within=Range(1, 65536))
    lr: float = setting(0.02, key=S, within=Range(0, 10, above=True))


@dataclass
class GramsConfig:
    """After training, this many gram rows (character 3-5-grams hashed into buckets) fitted to the word rows, so an
    unknown word backs off to the mean of its pieces and its grams (``swembed.pipeline.grams``); 0: pieces only."""

    buckets: int = setting(0, key=S, within=Range(0))


@dataclass
class BuildConfig:
    # keyed as the teacher describes itself
    teacher: str = setting("minilm", key=Key.BY_STAGE, flag=True, metavar="NAME",
                           help="short name (minilm, mpnet, gte-base, me5-small, ...), folder or hub id")
    out: str = setting("models/minilm-256", key=Key.NEVER, flag=True, metavar="DIR", help="model folder to write")
    work_dir: str | None = setting(None, key=Key.NEVER, flag=True, metavar="DIR", help="stage cache")  # <out>.work
    device: str = setting("auto", key=Key.NEVER, flag=True, flag_choices=DEVICES,  # also cuda:N in a recipe
                          help="where the teacher and training run")
    dtype: str = setting("float32", key=Key.NEVER, choices=TABLE_DTYPES, flag=True, help="table dtype")  # at export
    seed: int = setting(0, key=Key.BY_STAGE, within=Range(0), flag=True,  # numpy's generators take no negative seed
                        help="seed for every sampling step")
    langs: list[str] = setting(key=Key.BY_STAGE, factory=lambda: ["en"])  # a stage (and key) per language
    # multilingual: language -> sources
    corpora: dict[str, list[str]] = setting(key=Key.BY_STAGE, factory=dict)
    segmenters: dict[str, str] = setting(key=Key.BY_STAGE, factory=dict)  # e.g. {zh = "jieba", ja = "fugashi"}
    # language -> conversion: rows for the words of another script, copied from the corpus's spelling after
    # distillation (swembed.pipeline.variants); zh tables read traditional characters unless set to {}
    script_variants: dict[str, str] = setting(key=Key.BY_STAGE, factory=lambda: {"zh": "t2s"})
    # english<TAB>other files: a list pairs langs[0] with langs[1]; a table {lang: [files]} pairs langs[0] with each
    parallel: list[str] | dict[str, list[str]] = setting(key=Key.BY_STAGE, factory=list, flag=True, metavar="FILE",
                                                          help="english<TAB>other pair files for the contrastive loss")
    # held-out text (files, folders; e.g. the evaluation sets): no corpus sentence or training pair repeats a line
    # or tab-separated field of it (compared without case, spaces and punctuation)
    exclude: list[str] = setting(key=Key.BY_STAGE, factory=list, flag=True, metavar="PATH",
                                 help="held-out files or folders (eval sets): no corpus sentence or training pair "
                                      "repeats their lines (case, spaces and punctuation ignored)")
    distill_enabled: bool = setting(True, key=Key.NEVER, flag="--no-distill", help="stop after PCA")
    # keep each word's k largest dims (lexicon tables, e.g. from LENS); at most dim: BuildConfig.validate; at export
    lexicon_top_k: int | None = setting(None, key=Key.NEVER, within=Range(1, unset="every dimension"), flag=True,
                                        metavar="K", help="keep each word's k largest dims (LENS tables)")
    checkpoint_seconds: float = setting(60.0, key=Key.NEVER, within=Range(0), flag=True, metavar="SECONDS",
                                        help="least time between checkpoints")
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    # an unknown word weighs 2 in the mean: rarer than any row's word (STS-B dev 81.83 -> 82.75 on the default build;
    # reports/build-speed.md); menu recipes name their own
    tokenization: TokenizationRules = field(default_factory=lambda: TokenizationRules(oov_backoff="pieces",
                                                                                        oov_weight=2.0))
    vocab: VocabConfig = field(default_factory=VocabConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    compose: ComposeConfig = field(default_factory=ComposeConfig)
    pca: PCAConfig = field(default_factory=PCAConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)
    coteacher: CoTeacherConfig = field(default_factory=CoTeacherConfig)
    splits: SplitsConfig = field(default_factory=SplitsConfig)
    paragraphs: ParagraphsConfig = field(default_factory=ParagraphsConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    shrinkage: ShrinkageConfig = field(default_factory=ShrinkageConfig)
    alone: AloneConfig = field(default_factory=AloneConfig)
    grams: GramsConfig = field(default_factory=GramsConfig)
    query_weights: QueryWeightsConfig = field(default_factory=QueryWeightsConfig)
    lexical_weights: LexicalWeightsConfig = field(default_factory=LexicalWeightsConfig)

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

    def data_sources(self) -> dict[str, list[str]]:
        """Every text source the build reads, by the setting that names it (``swembed data sources``)."""
        named = {"[corpus] sources": [s for lang in self.langs for s in self.corpus_for(lang).sources],
                 "exclude": self.exclude, "[extract] fill_sources": self.extract.fill_sources,
                 "[splits] documents": self.splits.documents, "[splits] pairs": self.splits.pairs,
                 "parallel": [part for files in self.parallel_files().values() for spec in files
                              for part in spec.split("::")]}
        return {where: list(specs) for where, specs in named.items() if specs}

    def validate(self) -> None:
        """Every setting in its range (``RANGES``) and consistent with the others; raises ``BuildError`` (an
        ``OptionError`` naming the setting for a value out of its range) before any work."""
        checked = self.__dict__.get("_checked", {})  # what apply_settings checked as it set it, naming its source
        for key in ranges_of(type(self)):
            if key not in checked or checked[key] is not self.get(key):
                check_option(key, self.get(key), config_type=type(self))
        self._check_languages()
        for key, allowed in choices_of(type(self)).items():
            if self.get(key) not in allowed:
                raise BuildError(f"{key_label(key)} must be one of {', '.join(allowed)}, got {self.get(key)!r}")
        if self.device not in DEVICES and not re.fullmatch(r"cuda:\d+", str(self.device)):
            raise BuildError(f"device must be one of {', '.join(DEVICES)} or cuda:N, got {self.device!r}")
        self._check_paths()
        self._check_together()

    def _check_languages(self) -> None:
        """Distinct languages, each with a corpus when there are several; parallel files, word lists and script
        variants only where they apply."""
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

    def _check_together(self) -> None:
        """Settings that are each in range but do not go together."""
        if self.corpus.max_words < self.corpus.min_words:
            raise BuildError(f"--max-words {self.corpus.max_words} is below --min-words {self.corpus.min_words}")
        if self.lexicon_top_k is not None and self.lexicon_top_k > self.pca.dim:
            raise BuildError(f"--lexicon-top-k must be between 1 and --dim {self.pca.dim}, got {self.lexicon_top_k}")
        self._check_pair_sections()
        fill = [name for name, value in (("fill_max_words", self.extract.fill_max_words),
                                         ("fill_sources", self.extract.fill_sources)) if value]
        if fill and (self.extract.sentences != "cover" or not self.extract.max_sentences):
            raise BuildError(f"[extract] {fill[0]} is for a cover filled to max_sentences (sentences = \"cover\" "
                             "with max_sentences set)")
        if self.extract.window and self.extract.sentences not in QUOTA_CHOICES:
            raise BuildError("[extract] window is for the sentences a quota chooses (sentences = \"quota\" or "
                             "\"cover\")")
        by_source = [name for name, section in (("pca", self.pca), ("distill", self.distill)) if section.sources]
        if self.extract.window and by_source:
            raise BuildError(f"[extract] window reads parts of sentences, which [{by_source[0]}] sources cannot "
                             "trace to their corpus source; use one or the other")
        on_cuda = self.device.startswith("cuda")
        if self.extract.teacher_runtime == "onnx" and (self.extract.teacher_dtype == "bfloat16" or on_cuda):
            raise BuildError("--teacher-runtime onnx runs a float32 teacher on the CPU, not with --teacher-dtype "
                             "bfloat16 or --device cuda")
        if self.extract.teacher_dtype == "int8" and (self.extract.teacher_runtime == "torch" or on_cuda):
            raise BuildError("--teacher-dtype int8 runs the teacher on ONNX Runtime on the CPU, not with "
                             "--teacher-runtime torch or --device cuda")
        if self.distill.random_batch_weight and not self.distill.cell_size:
            raise BuildError("random_batch_weight needs cell_size (without neighbour cells every batch is random)")
        co_weights = [weight for _, weight in self.coteacher.pairs()]
        if co_weights and not (min(co_weights) > 0 and sum(co_weights) < 1):
            raise BuildError(f"[coteacher] weights must be above 0 and sum to below 1 (the teacher keeps the rest), "
                             f"got {self.coteacher.weights}")

    def pair_sections(self) -> list[tuple[str, list[str], str]]:
        """The sections that read pair or document files: (section, its files, what a file holds)."""
        return [("retrieval", self.retrieval.files, "retrieval pairs"),
                ("query_weights", self.query_weights.files, "query weight pairs"),
                ("lexical_weights", self.lexical_weights.files, "lexical weight pairs"),
                ("paragraphs", self.paragraphs.files, "paragraph documents")]

    def _check_pair_sections(self) -> None:
        """The sections that train on pairs or documents: one language, and settings their loss can use."""
        paired = [name for name, files, _ in self.pair_sections() if files and name != "paragraphs"]
        if paired and self.multilingual:
            raise BuildError(f"[{paired[0]}] files are for one-language builds (their pairs train langs[0])")
        if self.paragraphs.files and (self.multilingual or self.paragraphs.query_weight > 0):
            raise BuildError("[paragraphs] files are for one-language builds without query_weight (their documents "
                             "have no corpus line before them)")
        if self.retrieval.windows and self.retrieval.loss != "contrastive":
            raise BuildError("[retrieval] windows is for loss = \"contrastive\" (the kd loss distils the teacher's "
                             "whole-document scores)")
        if self.retrieval.cell_size and self.retrieval.loss != "contrastive":
            raise BuildError("[retrieval] cell_size is for loss = \"contrastive\" (the kd loss's batches are the "
                             "teacher's softmax over random documents)")
        if self.retrieval.directions != "both" and self.retrieval.loss != "contrastive":
            raise BuildError("[retrieval] directions is for loss = \"contrastive\" (the kd loss distils each "
                             "query's softmax over the documents, one direction already)")
        if self.retrieval.mask_siblings and self.retrieval.loss != "contrastive":
            raise BuildError("[retrieval] mask_siblings is for loss = \"contrastive\" (the kd loss has no labels: "
                             "the teacher scores a sibling as it is)")
        if self.retrieval.hard_negatives and (self.retrieval.loss != "contrastive" or self.retrieval.windows):
            raise BuildError("[retrieval] hard_negatives is for loss = \"contrastive\" on whole passages (no "
                             "windows): a mined passage is one more column of the batch's softmax")

    def _check_paths(self) -> None:
        """No empty path among what the build reads (it would name the current folder), and the stage cache
        (``work_path``) not inside ``out``, where the finished model would replace it."""
        sources = [s for lang in self.langs for s in self.corpus_for(lang).sources]
        named = {"--corpus": sources, "--exclude": self.exclude, "--word-lists": self.vocab.word_lists,
                 **{f"[{name}] files": files for name, files, _ in self.pair_sections()}}
        for flag, paths in named.items():
            if any(not str(path).strip() for path in paths):
                raise BuildError(f"{flag}: an empty path would read the current folder; give a file or folder")
        if self.work_path.expanduser().exists() and not self.work_path.expanduser().is_dir():
            raise BuildError(f"--work-dir {self.work_path}: a file, not a folder; the stage cache is a folder (give "
                             "another path)")
        out, work = Path(self.out).expanduser().resolve(), self.work_path.expanduser().resolve()
        if Path(self.out).name not in ("", ".", "..") and (work == out or out in work.parents):  # else: check_writable
            raise BuildError(f"--work-dir {self.work_path} is inside --out {self.out}, which the finished model "
                             "replaces; give a work folder outside it")

    def get(self, key: str) -> object:
        """A setting by its key: ``"seed"`` or ``"section.field"``."""
        section, _, name = key.rpartition(".")
        return getattr(getattr(self, section) if section else self, name)

    def input_paths(self) -> list[str]:
        """What the build reads (teacher, corpora, word lists, stage cache): an ``--out`` holding one is never
        replaced."""
        sources = [s for lang in self.langs for s in self.corpus_for(lang).sources]
        return [str(self.teacher), *map(str, sources), *map(str, self.exclude), *map(str, self.vocab.word_lists),
                *(str(path) for _, files, _ in self.pair_sections() for path in files),
                str(self.work_path),
                *([self.splits.out] if self.splits.out else [])]

    def check_before_work(self, overwrite: bool = False) -> None:
        """What a build can check before loading the teacher (and before importing torch): the settings
        (``validate``), then what they name (``check_inputs``)."""
        self.validate()
        self.check_inputs(overwrite)

    def check_inputs(self, overwrite: bool = False) -> None:
        """What valid settings name, checked before any work: that the teacher and co-teachers are names a teacher
        can have, the output folder, and that every corpus source (and word list) exists and starts like text."""
        from swembed.pipeline.sources import check_sources, named_sources
        from swembed.runtime.outputs import check_writable
        from swembed.teachers.registry import check_teacher_name

        for name in [self.teacher, *(name for name, _ in self.coteacher.pairs() if self.distill_enabled)]:
            check_teacher_name(str(name))
        check_writable(Path(self.out), overwrite, self.input_paths())
        for lang in self.langs:
            check_sources(self.corpus_for(lang).sources)
        if self.splits.out:  # seconds of work, and what exclude and [retrieval] files below name
            make_splits(self.splits)
        check_sources(self.exclude)
        corpus_sources = [s for lang in self.langs for s in self.corpus_for(lang).sources]
        for patterns, where in ((self.pca.sources, "[pca] sources"), (self.distill.sources, "[distill] sources"),
                                (self.extract.fill_sources, "[extract] fill_sources")):
            if patterns:
                named_sources(patterns, corpus_sources, where)
        asked = ("--teacher-runtime onnx" if self.extract.teacher_runtime == "onnx" else
                 "--teacher-dtype int8" if self.extract.teacher_dtype == "int8" else None)
        if asked and not onnx_runtime_available():
            raise BuildError(f"{asked} needs onnxruntime and onnx: pip install 'swembed[build]'")
        for paths, what, where in ((self.vocab.word_lists, "word list", "--word-lists / [vocab] word_lists"),
                                   *((files, what, f"[{name}] files") for name, files, what in self.pair_sections())):
            for path in paths:
                if not Path(path).expanduser().is_file():
                    raise BuildError(f"{what} not found: {path} ({where})")
            check_sources(paths)  # a binary file fails here too


# the sections: every field of BuildConfig that is itself a dataclass (a recipe's tables)
SECTIONS = {f.name: f.type for f in fields(BuildConfig) if is_dataclass(getattr(BuildConfig(), f.name))}
# recipe keys of the post-training stages from before they had sections: [distill] key -> (section, field)
LEGACY_DISTILL_KEYS = {"co_teacher": ("coteacher", "teachers"), "co_teacher_weight": ("coteacher", "weights"),
                       "shrinkage": ("shrinkage", "k"), "alone_shrinkage": ("alone", "k"),
                       "gram_buckets": ("grams", "buckets")}
# every older recipe key, (section, key) -> (section, field): each still loads, with a one-line warning
OLDER_KEYS = {**{("distill", old): new for old, new in LEGACY_DISTILL_KEYS.items()},
              ("compose", "shrinkage"): ("compose", "piece_prior")}


def ranges_of(config_type: type) -> dict[str, Range]:
    """Every numeric setting of a config dataclass (and of its sections) with its declared range, by key
    (``"pca.dim"``)."""
    return {key: meta.within for key, item in walk(config_type) if (meta := declaration(item)) and meta.within}


def choices_of(config_type: type) -> dict[str, tuple[str, ...]]:
    """Every setting of a config dataclass (and of its sections) with a fixed set of values, its declared tuple."""
    return {key: meta.choices for key, item in walk(config_type) if (meta := declaration(item)) and meta.choices}


# Every numeric build setting and its range, read from the declarations (``setting(..., within=Range(...))``): the
# one place they are checked (recipes, flags and swembed.build alike). A value out of range is refused before any
# work, naming the setting and its range.
RANGES = ranges_of(BuildConfig)
# Every build setting with a fixed set of values and its one tuple of them, which argparse's choices, validate and
# the docs read. (``device`` also takes ``cuda:N``, so only its flag restricts it, to DEVICES.)
CHOICES = choices_of(BuildConfig)


def build_flags(config_type: type = BuildConfig) -> list[tuple[str, str, dict]]:
    """``swembed build``'s flags, from the declarations: (flag, key, argparse options) for each setting that declares
    one. An on/off setting's flag sets the opposite of its default; a list takes one or more values; a number's
    type, a setting's choices and its help text are its declaration's (help names no default: the CLI adds it)."""
    flags = []
    for key, item in walk(config_type):
        meta, flag = declaration(item), flag_name(item)
        if meta is None or flag is None:
            continue
        options: dict = {"help": meta.help}
        annotation = {part.strip() for part in str(item.type).split("|")}
        if isinstance(default_of(item), bool):
            options.update(action="store_const", const=not default_of(item))
        elif annotation & {"int", "float"}:
            options["type"] = float if "float" in annotation else int
        elif any(part.startswith("list") for part in annotation):
            options["nargs"] = "+"
        if meta.choices or meta.flag_choices:
            options["choices"] = meta.flag_choices or meta.choices
        if meta.metavar:
            options["metavar"] = meta.metavar
        flags.append((flag, key, options))
    return flags


def older_flags(config_type: type = BuildConfig) -> dict[str, str]:
    """Each earlier name of a flag (declared ``older_flags``) -> the flag to write instead."""
    return {older: str(flag_name(item)) for _, item in walk(config_type) if (meta := declaration(item))
            for older in meta.older_flags}


class OptionError(BuildError):
    """A setting outside its range; ``key`` names it (``"pca.dim"``), so the CLI can name its flag instead."""

    def __init__(self, key: str, value: object, source: str = "", name: str | None = None,
                 allowed: Range | None = None) -> None:
        self.key, self.value, self.source, self.allowed = key, value, source, allowed or RANGES[key]
        where = f"{source}: " if source else ""
        super().__init__(where + self.allowed.refusal(name or key_label(key), value))

    def named(self, name: str) -> OptionError:
        """The same refusal naming the setting ``name`` (a flag)."""
        return OptionError(self.key, self.value, self.source, name, self.allowed)


def key_label(key: str) -> str:
    """How a recipe writes a setting: ``[pca] dim``, or ``seed`` for a top-level one."""
    section, _, name = key.rpartition(".")
    return f"[{section}] {name}" if section else name


def check_option(key: str, value: object, source: str = "", name: str | None = None,
                 config_type: type | None = None) -> None:
    """Refuse ``value`` for setting ``key`` (written ``name`` where it was given) unless it lies in its declared
    range (``RANGES[key]``, or that of ``config_type``'s declaration; a key without a range is free). The one check
    of a setting's range."""
    ranges = RANGES if config_type in (None, BuildConfig) else ranges_of(config_type)  # type: ignore[arg-type]
    if key in ranges and not ranges[key].holds(value):
        raise OptionError(key, value, source, name, ranges[key])


_TYPES: dict[str, type | tuple[type, ...]] = {
    "str": str, "int": int, "float": (int, float), "bool": bool, "None": type(None), "list": list, "dict": dict}


def _split_top(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside brackets (``dict[str, list[str]] | None``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == separator and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return [*parts, text[start:].strip()]


def _fits(value: object, annotation: str) -> bool:
    """Whether ``value`` has the type ``annotation`` names, elements included (``list[str]``: a list of strings)."""
    for kind in _split_top(annotation, "|"):
        base, _, args = kind.partition("[")
        inner = _split_top(args[:-1], ",") if args else []
        if base == "list" and isinstance(value, list):
            if all(_fits(item, inner[0]) for item in value) if inner else True:
                return True
        elif base == "dict" and isinstance(value, dict):
            if all(_fits(k, inner[0]) and _fits(v, inner[1]) for k, v in value.items()) if inner else True:
                return True
        elif base not in ("list", "dict") and isinstance(value, _TYPES[base]) and not (
                base in ("int", "float") and isinstance(value, bool)):
            return True
    return False


def _check_recipe_types(source: str, where: str, annotations: dict[str, str], values: dict) -> None:
    """Each value has its field's declared type, elements included, so a recipe's ``dim = "x"`` or
    ``sources = [1]`` is an error naming the file and key, not a TypeError in some stage."""
    for key, value in values.items():
        if not _fits(value, annotations[key]):
            raise BuildError(f"{source}: {where}{key} must be {annotations[key]}, got {value!r}")


def _with_sections(settings: dict, source: str) -> tuple[dict, dict[str, str]]:
    """``settings`` with the older keys (``OLDER_KEYS``) moved to the keys that replace them, each with a one-line
    warning naming ``source`` and the key to write instead; and how each moved one was written, by its key."""
    older = [(section, key) for section, key in OLDER_KEYS
             if isinstance(settings.get(section), dict) and key in settings[section]]
    if not older:
        return settings, {}
    settings = {name: dict(value) if isinstance(value, dict) else value for name, value in settings.items()}
    written = {}
    for old_section, old in older:
        section, name = OLDER_KEYS[(old_section, old)]
        table = settings.setdefault(section, {})
        if not isinstance(table, dict) or name in table:
            raise BuildError(f"{source}: [{old_section}] {old} and [{section}] {name} are the same setting; give one")
        logger.warning("%s: [%s] %s is an older key; write [%s] %s", source, old_section, old, section, name)
        table[name] = settings[old_section].pop(old)
        written[f"{section}.{name}"] = f"[{old_section}] {old}"
    return settings, written


def _checked(config: BuildConfig, key: str, value: object, source: str, name: str | None) -> object:
    """``value`` once checked against the range of setting ``key`` (``check_option``), recorded as checked so that
    ``validate`` does not check it again."""
    check_option(key, value, source, name, type(config))
    config.__dict__.setdefault("_checked", {})[key] = value
    return value


def apply_settings(config: BuildConfig, settings: dict, source: str) -> BuildConfig:
    """Set ``config``'s fields from a recipe-shaped dict (top-level keys and section tables), each value checked
    for its type and range, naming ``source`` and the key."""
    top = {f.name: cast(str, f.type) for f in fields(config)}  # annotations are strings (__future__)
    settings, written = _with_sections(settings, source)
    for key, value in settings.items():
        if is_dataclass(getattr(config, key, None)):
            if not isinstance(value, dict):
                raise BuildError(f"{source}: [{key}] must be a table")
            section = getattr(config, key)
            unknown = set(value) - {f.name for f in fields(section)}
            if unknown:
                raise BuildError(f"{source}: unknown key{'s' * (len(unknown) > 1)} in [{key}]: "
                                 f"{', '.join(sorted(unknown))}")
            _check_recipe_types(source, f"[{key}] ", {f.name: cast(str, f.type) for f in fields(section)}, value)
            for name, item in value.items():
                _checked(config, f"{key}.{name}", item, source, written.get(f"{key}.{name}"))
            try:
                setattr(config, key, replace(section, **value))
            except (TypeError, ValueError) as exc:
                raise BuildError(f"{source}: [{key}]: {exc}") from None
        elif key in top:
            _check_recipe_types(source, "", top, {key: value})
            setattr(config, key, _checked(config, key, value, source, None))
        elif key not in ("name", "description"):
            raise BuildError(f"{source}: unknown key {key!r}")
    return config


def recipe_path(path: str | Path) -> Path:
    """``--recipe``'s value as a path; an empty one (``Path("")`` is the current folder) is refused."""
    if not str(path).strip():
        raise BuildError("--recipe: an empty path; give a recipe file (see pipelines/)")
    return Path(path)


def read_recipe_toml(path: Path) -> dict:
    """A recipe file's TOML table; a missing or malformed file is one line naming it (``BuildError``)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BuildError(f"recipe not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BuildError(f"{path}: not a valid TOML recipe ({exc})") from None
    except RecursionError:
        raise BuildError(f"{path}: nested too deeply to read (a recipe is a few levels deep)") from None
    except OSError as exc:  # a folder, a file without read permission, ...
        raise BuildError(f"{path}: not readable as a recipe ({exc.strerror})") from None


def make_build_config(recipe: str | Path | BuildConfig | None = None, settings: dict | None = None,
                      source: str = "") -> BuildConfig:
    """The one way from settings to a ``BuildConfig`` (the CLI's flags, ``swembed.build``'s arguments): the
    recipe's (a TOML file, a ``BuildConfig``, copied, or the defaults), then ``settings`` on top (recipe-shaped:
    top-level keys and section tables; each value checked for its type and range as it is set, naming ``source``),
    then the whole config validated, once."""
    if isinstance(recipe, BuildConfig):
        config = deepcopy(recipe)
    else:
        config = load_recipe(recipe) if recipe is not None else BuildConfig()
    apply_settings(config, settings or {}, source)
    config.validate()
    return config


def load_recipe(path: str | Path, _seen: tuple[Path, ...] = ()) -> BuildConfig:
    """A build from a TOML recipe in ``pipelines/``. ``base = "other.toml"`` (a path from the recipe's folder)
    starts from that recipe; this one's keys then replace its keys, one by one within a section."""
    path = recipe_path(path)
    data = read_recipe_toml(path)
    base = data.pop("base", None)
    _check_recipe_types(str(path), "", {"base": "str | None"}, {"base": base})
    if base is None:
        return apply_settings(BuildConfig(), data, str(path))
    base_path, seen = path.parent / base, (*_seen, path.resolve())
    if base_path.resolve() in seen:
        raise BuildError(f"{path}: base {base!r} leads back to this recipe")
    if not base_path.is_file():
        raise BuildError(f"{path}: base recipe not found: {base_path} (a path from the recipe's folder)")
    return apply_settings(load_recipe(base_path, seen), data, str(path))
