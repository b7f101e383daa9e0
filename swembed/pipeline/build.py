"""`swembed build`: the one build driver, for one language or several.

Per language: corpus -> vocab -> extract (cached per language, so English is extracted once for every
table that has it). Then, over all languages: compose -> pca -> (alone) -> distill -> script variants
(``swembed.pipeline.variants``) -> the model folder. Every stage
is cached under the work directory by the hash of its config and inputs, and resumes after a crash.
"""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from swembed.pipeline import files
from swembed.pipeline.alone import ALONE
from swembed.pipeline.compose import Layout, run_compose
from swembed.pipeline.config import BuildConfig
from swembed.pipeline.coteacher import COTEACHER
from swembed.pipeline.corpus import run_corpus
from swembed.pipeline.distill import DistillInputs, run_distill
from swembed.pipeline.extract import Selection, extract_identity, run_extract
from swembed.pipeline.grams import GRAM_ROWS
from swembed.pipeline.paragraphs import PARAGRAPHS
from swembed.pipeline.retrieval import RETRIEVAL
from swembed.pipeline.parallel import run_pairs
from swembed.pipeline.pca import check_dims, kept_components, run_pca
from swembed.pipeline.plan import DeviceMonitor, build_plan
from swembed.pipeline.shrinkage import SHRINKAGE
from swembed.pipeline.sources import CorpusError
from swembed.pipeline.stage import PostTraining, PrepareSources, StageContext, StageResult
from swembed.pipeline.variants import add_variants
from swembed.pipeline.vocab import run_vocab
from swembed.runtime.folder import update_config, write_model_folder

logger = logging.getLogger(__name__)

# The stages around training, each reading its own config section (BuildConfig.<section>), in the order they run:
# prepare hooks before training, refine hooks on the trained table (shrinkage before alone), rows after it.
POST_TRAINING: tuple[PostTraining, ...] = (SHRINKAGE, ALONE, COTEACHER, PARAGRAPHS, RETRIEVAL, GRAM_ROWS)


def post_training(config: BuildConfig) -> list[tuple[PostTraining, object]]:
    """The registered post-training stages this build's settings turn on, each with its config section. Their
    prepare and refine hooks run only with distillation (they feed and refine training); rows follow whatever
    table the build ends with."""
    sections = [(step, getattr(config, step.section)) for step in POST_TRAINING]
    return [(step, section) for step, section in sections if step.enabled(section)]


def prune_top_k(table: np.ndarray, k: int) -> np.ndarray:
    """Each row with all but its k largest entries set to 0 (a sparse lexicon table whose dims are clusters)."""
    keep = np.argpartition(-table, k - 1, axis=1)[:, :k]
    out = np.zeros_like(table)
    np.put_along_axis(out, keep, np.take_along_axis(table, keep, axis=1), axis=1)
    return out


def stage_summary(results: list[tuple[str, StageResult]]) -> dict:
    """Cost, cache state, artifact folder and statistics of each (named) stage, for the model's config.json."""
    return {name: {"wall_s": r.manifest.get("wall_s"), "peak_rss_mb": r.manifest.get("peak_rss_mb"),
                   "cached": r.cached, "artifact": r.path.name, **({"stats": r.stats} if r.stats else {})}
            for name, r in results}


def load_build_teacher(name: str, config: BuildConfig):
    """A teacher (the build's own or its co-teacher) on the build's device, batch size and precision."""
    from swembed.teachers import load_teacher

    return load_teacher(name, device=config.device, batch_tokens=config.extract.batch_tokens,
                        precision=config.extract.teacher_dtype)


def build(config: BuildConfig, force: bool = False, quiet: bool = False, overwrite: bool = False) -> dict:
    """Run the whole pipeline; returns the build report (also saved in the model's config.json)."""
    from swembed.teachers import resolve_teacher

    config.check_before_work(overwrite)
    started = time.time()
    for name, _ in config.coteacher.pairs() if config.distill_enabled else []:
        resolve_teacher(name)  # a missing co-teacher fails now, not after extraction
    teacher = load_build_teacher(config.teacher, config)
    ctx = StageContext(config.work_path, config.device, config.seed, force, quiet, config.checkpoint_seconds)
    with DeviceMonitor(teacher.device) as monitor:  # its sampling thread ends even if a stage raises
        return _build(ctx, config, teacher, monitor, started, overwrite)


def _build(ctx: StageContext, config: BuildConfig, teacher, monitor: DeviceMonitor, started: float,
           overwrite: bool) -> dict:
    check_dims(config.pca, teacher.dim)
    tokenizer_json = teacher.tokenizer_json()
    rules = {lang: config.rules(lang) for lang in config.langs}
    stages: list[tuple[str, StageResult]] = []
    corpora, vocabs = {}, {}
    for lang in config.langs:
        corpus = run_corpus(ctx, config.corpus_for(lang), rules[lang].unicode_normalization, config.exclude)
        needed = max(2 * config.distill.batch_size if config.distill_enabled else 0, config.pca.dim + 1)
        if corpus.stats["kept"] < needed:
            raise CorpusError(f"the {lang} corpus has {corpus.stats['kept']} usable sentences; this build needs at "
                              f"least {needed} (PCA to {config.pca.dim} dims, distillation batches of "
                              f"{config.distill.batch_size})")
        corpora[lang] = corpus
        vocabs[lang] = run_vocab(ctx, config.vocab, rules[lang], corpus, tokenizer_json)
    cached_extracts, selections = {}, {}
    for lang in config.langs:
        identity = extract_identity(config.extract, rules[lang], teacher, config.seed)
        inputs = [corpora[lang], vocabs[lang]]
        cached_extracts[lang] = ctx.cached("extract", identity, inputs)
        selections[lang] = None if cached_extracts[lang] else Selection.make(
            config.extract, rules[lang], corpora[lang], vocabs[lang], teacher, config.seed)
    vocab_sizes = {lang: vocabs[lang].stats["vocab_size"] for lang in config.langs}
    post = post_training(config)
    later = [line for step, section in post if step.plan and config.distill_enabled
             for line in step.plan(section, sum(vocab_sizes.values()))]
    plan = build_plan(config, teacher, selections, vocab_sizes, tuple(later))
    print(plan["text"], file=sys.stderr, flush=True)
    monitor.phase("corpus, vocab, plan")
    extracts = {}
    for lang in config.langs:
        extracts[lang] = cached_extracts[lang] or run_extract(
            ctx, config.extract, rules[lang], corpora[lang], vocabs[lang], selections[lang], teacher)
        selections[lang] = None  # its texts are no longer needed
        suffix = f" ({lang})" if config.multilingual else ""
        stages += [(f"corpus{suffix}", corpora[lang]), (f"vocab{suffix}", vocabs[lang]),
                   (f"extract{suffix}", extracts[lang])]
    monitor.phase("extract")
    compose = run_compose(ctx, config.compose,
                          {lang: (rules[lang], vocabs[lang], extracts[lang]) for lang in config.langs}, tokenizer_json)
    pca = run_pca(ctx, config.pca, compose, extracts, rules, tokenizer_json)
    stages += [("compose", compose), ("pca", pca)]
    monitor.phase("compose, pca")
    final = pca
    if config.distill_enabled:
        score = config.distill.min_teacher_similarity is not None
        pair_stages = {(config.langs[0], lang): run_pairs(ctx, lang, paths, config.exclude, teacher, score,
                                                          [extracts[config.langs[0]], extracts[lang]])
                       for lang, paths in config.parallel_files().items()}
        stages += [(f"pairs ({a}-{b})", stage) for (a, b), stage in pair_stages.items()]
        sources = PrepareSources(teacher, compose, extracts, lambda name: load_build_teacher(name, config), corpora,
                                 config.exclude)
        prepared = {step.section: step.prepare(ctx, section, sources) for step, section in post if step.prepare}
        stages += [(label, stage) for items in prepared.values() for label, _, stage in items]
        final = run_distill(ctx, config.distill, DistillInputs(pca, compose, extracts, rules, tokenizer_json,
                                                               pair_stages, prepared, post))
        stages.append(("distill", final))
        monitor.phase("pairs, distill")
    extra_rows = []  # (section, stage, rows, labels)
    for step, section in post:
        if step.rows:
            extra_rows.append((step.section, *step.rows(ctx, section, final, compose)))
            stages.append((step.section, extra_rows[-1][1]))
    table = np.load(final.path / files.TABLE)
    if config.lexicon_top_k:
        table = prune_top_k(table, config.lexicon_top_k)
    export_start = time.time()
    layout = Layout.read(compose.path)
    contexts = np.load(compose.path / files.WORD_CONTEXTS)
    variants = {lang: name for lang, name in config.script_variants.items() if lang in config.langs}
    added = {}
    if variants:
        from tokenizers import Tokenizer

        tokenizers = layout.tokenizers(rules, Tokenizer.from_str(tokenizer_json))
        layout, table, contexts, added = add_variants(layout, table, contexts, tokenizers, variants)
    report = {
        "teacher": {k: v for k, v in teacher.describe().items() if k != "path"},
        "dim": int(table.shape[1]),
        "abtt_dropped": pca.stats.get("drop"),
        "tokenization": rules[config.langs[0]].to_dict(),
        "swembed_version": __import__("swembed").__version__,
        "build": {"config": asdict(config), "plan": plan["numbers"],
                  "stages": stage_summary(stages)},
    }
    if layout.pieces[1] > layout.pieces[0]:
        report["pieces"] = {"rows": layout.pieces}
    labels = layout.labels
    for name, _, rows, row_labels in extra_rows:
        report[name] = {"rows": [len(table), len(table) + len(rows)]}
        table = np.vstack([table, rows])
        labels = labels + row_labels
    if config.multilingual:
        report["languages"] = {lang: {"rows": span, "tokenization": rules[lang].to_dict()}
                               for lang, span in layout.languages.items()}
    extra = {"word_contexts": contexts}
    if (pca.path / files.PCA).is_file():
        mean, kept, _ = kept_components(pca.path / files.PCA)
        extra.update(pca_mean=mean, pca_components=kept)
    write_model_folder(Path(config.out), table.astype(config.dtype), labels,
                       {**report, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, tokenizer_json, extra,
                       overwrite=overwrite, inputs=config.input_paths())
    report["build"]["stages"]["export"] = {"wall_s": round(time.time() - export_start, 2), "cached": False,
                                           **({"stats": {f"variant rows {k}": n for k, n in added.items()}}
                                              if added else {})}
    monitor.phase("export")
    report["build"]["device"] = monitor.report()
    report["build"]["total_wall_s"] = round(time.time() - started, 2)
    update_config(Path(config.out), {"build": report["build"]})
    return report
