"""`swembed build`: run the stages in order, each cached under the work directory, then export."""
from __future__ import annotations

import logging
import time
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from swembed.pipeline.corpus import CorpusConfig, run_corpus
from swembed.pipeline.distill import DistillConfig, run_distill
from swembed.pipeline.export import DTYPES, export_model
from swembed.pipeline.extract import ExtractConfig, run_extract
from swembed.pipeline.pca import PCA_FILE, TABLE_FILE, PCAConfig, run_pca
from swembed.pipeline.sources import CorpusError
from swembed.pipeline.stage import StageResult
from swembed.pipeline.vocab import VocabConfig, read_vocab, run_vocab
from swembed.runtime.folder import update_config
from swembed.runtime.tokenizer import TokenizationRules, WordTokenizer

logger = logging.getLogger(__name__)


class BuildError(ValueError):
    """The build cannot run as configured."""


@dataclass
class BuildConfig:
    teacher: str = "minilm"
    out: str = "models/minilm-256"
    work_dir: str | None = None  # default: <out>.work
    device: str = "auto"
    dtype: str = "float32"
    seed: int = 0
    distill_enabled: bool = True
    lexicon_top_k: int | None = None  # keep each word's k largest dims (lexicon tables, e.g. from LENS)
    checkpoint_seconds: float = 60.0
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    vocab: VocabConfig = field(default_factory=VocabConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    pca: PCAConfig = field(default_factory=PCAConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)

    @property
    def work_path(self) -> Path:
        return Path(self.work_dir) if self.work_dir else Path(f"{self.out}.work")

    def seeded(self) -> BuildConfig:
        """Propagate the build seed to every stage that samples."""
        self.extract.seed = self.pca.seed = self.distill.seed = self.seed
        return self


_SECTIONS = {"corpus": CorpusConfig, "vocab": VocabConfig, "extract": ExtractConfig, "pca": PCAConfig,
             "distill": DistillConfig}


def prune_top_k(table: np.ndarray, k: int) -> np.ndarray:
    """Each row with all but its k largest entries set to 0 (a sparse lexicon table whose dims are clusters)."""
    if not 1 <= k <= table.shape[1]:
        raise BuildError(f"--lexicon-top-k must be between 1 and the table's {table.shape[1]} dims, got {k}")
    keep = np.argpartition(-table, k - 1, axis=1)[:, :k]
    out = np.zeros_like(table)
    np.put_along_axis(out, keep, np.take_along_axis(table, keep, axis=1), axis=1)
    return out


def apply_recipe(config, path: str | Path, sections: tuple[str, ...]):
    """Set ``config``'s fields from a TOML recipe: top-level keys, and one table per named stage section."""
    data = tomllib.loads(Path(path).read_text())
    for key, value in data.items():
        if key in sections:
            section = getattr(config, key)
            unknown = set(value) - {f.name for f in fields(section)}
            if unknown:
                raise BuildError(f"{path}: unknown keys in [{key}]: {sorted(unknown)}")
            for name, item in value.items():
                setattr(section, name, item)
        elif key in {f.name for f in fields(config)}:
            setattr(config, key, value)
        elif key not in ("name", "description"):
            raise BuildError(f"{path}: unknown key {key!r}")
    return config


def load_recipe(path: str | Path) -> BuildConfig:
    """A build from a TOML recipe in ``pipelines/``: top-level keys and one table per stage."""
    return apply_recipe(BuildConfig(), path, tuple(_SECTIONS))


def stage_summary(results: list[tuple[str, StageResult]]) -> dict:
    """Cost, cache state, artifact folder and statistics of each (named) stage, for the model's config.json."""
    return {name: {"wall_s": r.manifest.get("wall_s"), "peak_rss_mb": r.manifest.get("peak_rss_mb"),
                   "cached": r.cached, "artifact": r.path.name, **({"stats": r.stats} if r.stats else {})}
            for name, r in results}


def build(config: BuildConfig, force: bool = False, quiet: bool = False) -> dict:
    """Run the whole pipeline; returns the build report (also saved in the model's config.json)."""
    from swembed.teachers import load_teacher

    config.seeded()
    if config.dtype not in DTYPES:
        raise BuildError(f"--dtype must be one of {DTYPES}, got {config.dtype!r}")
    started = time.time()
    work = config.work_path
    teacher = load_teacher(config.teacher, device=config.device, batch_size=config.extract.batch_size)
    config.pca.validate(teacher.dim)
    config.distill.validate()
    if config.lexicon_top_k is not None and not 1 <= config.lexicon_top_k <= config.pca.dim:
        raise BuildError(f"--lexicon-top-k must be between 1 and --dim {config.pca.dim}, got {config.lexicon_top_k}")
    tokenizer_json = teacher.tokenizer_json()
    corpus = run_corpus(config.corpus, work, force=force, quiet=quiet)
    needed = max(config.distill.batch_size * 2 if config.distill_enabled else 0, config.pca.dim + 1)
    if corpus.stats["kept"] < needed:
        raise CorpusError(f"the corpus has {corpus.stats['kept']} usable sentences; this build needs at least "
                          f"{needed} (PCA to {config.pca.dim} dims, distillation batches of "
                          f"{config.distill.batch_size})")
    vocab = run_vocab(config.vocab, corpus, tokenizer_json, work, force=force, quiet=quiet)
    words, _ = read_vocab(vocab)
    rules = TokenizationRules(lowercase=config.vocab.lowercase, unicode_normalization=config.corpus.normalization)

    def make_tokenizer() -> WordTokenizer:
        from tokenizers import Tokenizer

        return WordTokenizer({w: i for i, w in enumerate(words)}, rules, Tokenizer.from_str(tokenizer_json))

    extract = run_extract(config.extract, corpus, vocab, teacher, work, force=force, quiet=quiet)
    pca = run_pca(config.pca, extract, make_tokenizer, work, force=force, quiet=quiet)
    stages = [corpus, vocab, extract, pca]
    final = pca
    if config.distill_enabled:
        final = run_distill(config.distill, extract, pca, make_tokenizer, work, config.checkpoint_seconds,
                            force=force, quiet=quiet)
        stages.append(final)
    table = np.load(final.path / TABLE_FILE)
    if config.lexicon_top_k:
        table = prune_top_k(table, config.lexicon_top_k)
    export_start = time.time()
    report = {
        "teacher": teacher.describe(),
        "dim": int(table.shape[1]),
        "abtt_dropped": pca.stats.get("drop"),
        "tokenization": rules.to_dict(),
        "swe_version": __import__("swembed").__version__,
        "build": {"config": asdict(config), "stages": stage_summary([(r.name, r) for r in stages])},
    }
    report["teacher"].pop("path", None)
    export_model(Path(config.out), table, words, tokenizer_json, report, pca.path / PCA_FILE, config.dtype)
    report["build"]["stages"]["export"] = {"wall_s": round(time.time() - export_start, 2), "cached": False}
    report["build"]["total_wall_s"] = round(time.time() - started, 2)
    update_config(Path(config.out), {"build": report["build"]})
    return report
