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
from swembed.pipeline.alone import run_alone
from swembed.pipeline.compose import Layout, run_compose
from swembed.pipeline.config import BuildConfig, BuildError
from swembed.pipeline.coteacher import run_coteacher
from swembed.pipeline.corpus import run_corpus
from swembed.pipeline.distill import run_distill
from swembed.pipeline.extract import Selection, extract_identity, run_extract
from swembed.pipeline.grams import run_grams
from swembed.pipeline.parallel import run_pairs
from swembed.pipeline.pca import check_dims, kept_components, run_pca
from swembed.pipeline.plan import DeviceMonitor, build_plan
from swembed.pipeline.sources import CorpusError
from swembed.pipeline.stage import StageResult, cached_stage
from swembed.pipeline.variants import add_variants
from swembed.pipeline.vocab import run_vocab
from swembed.runtime.folder import update_config, write_model_folder

logger = logging.getLogger(__name__)


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
    for name, _ in config.distill.co_teachers() if config.distill_enabled else []:
        resolve_teacher(name)  # a missing co-teacher fails now, not after extraction
    teacher = load_build_teacher(config.teacher, config)
    with DeviceMonitor(teacher.device) as monitor:  # its sampling thread ends even if a stage raises
        return _build(config, teacher, monitor, started, force, quiet, overwrite)


def _build(config: BuildConfig, teacher, monitor: DeviceMonitor, started: float, force: bool, quiet: bool,
           overwrite: bool) -> dict:
    work = config.work_path
    check_dims(config.pca, teacher.dim)
    if config.lexicon_top_k is not None and not 1 <= config.lexicon_top_k <= config.pca.dim:
        raise BuildError(f"--lexicon-top-k must be between 1 and --dim {config.pca.dim}, got {config.lexicon_top_k}")
    tokenizer_json = teacher.tokenizer_json()
    rules = {lang: config.rules(lang) for lang in config.langs}
    stages: list[tuple[str, StageResult]] = []
    corpora, vocabs = {}, {}
    for lang in config.langs:
        corpus = run_corpus(config.corpus_for(lang), rules[lang].unicode_normalization, work, force, quiet,
                            config.exclude)
        needed = max(2 * config.distill.batch_size if config.distill_enabled else 0, config.pca.dim + 1)
        if corpus.stats["kept"] < needed:
            raise CorpusError(f"the {lang} corpus has {corpus.stats['kept']} usable sentences; this build needs at "
                              f"least {needed} (PCA to {config.pca.dim} dims, distillation batches of "
                              f"{config.distill.batch_size})")
        corpora[lang] = corpus
        vocabs[lang] = run_vocab(config.vocab, rules[lang], corpus, tokenizer_json, work, force, quiet)
    cached_extracts, selections = {}, {}
    for lang in config.langs:
        identity = extract_identity(config.extract, rules[lang], teacher, config.seed)
        inputs = [corpora[lang], vocabs[lang]]
        cached_extracts[lang] = None if force else cached_stage("extract", work, identity, inputs)
        selections[lang] = None if cached_extracts[lang] else Selection.make(
            config.extract, rules[lang], corpora[lang], vocabs[lang], teacher, config.seed)
    plan = build_plan(config, teacher, selections, {lang: vocabs[lang].stats["vocab_size"] for lang in config.langs})
    print(plan["text"], file=sys.stderr, flush=True)
    monitor.phase("corpus, vocab, plan")
    extracts = {}
    for lang in config.langs:
        extracts[lang] = cached_extracts[lang] or run_extract(
            config.extract, rules[lang], corpora[lang], vocabs[lang], selections[lang], teacher, work, config.seed,
            config.checkpoint_seconds, force, quiet)
        selections[lang] = None  # its texts are no longer needed
        suffix = f" ({lang})" if config.multilingual else ""
        stages += [(f"corpus{suffix}", corpora[lang]), (f"vocab{suffix}", vocabs[lang]),
                   (f"extract{suffix}", extracts[lang])]
    monitor.phase("extract")
    compose = run_compose(config.compose, {lang: (rules[lang], vocabs[lang], extracts[lang]) for lang in config.langs},
                          tokenizer_json, work, force, quiet)
    pca = run_pca(config.pca, compose, extracts, rules, tokenizer_json, work, config.seed, force, quiet)
    stages += [("compose", compose), ("pca", pca)]
    monitor.phase("compose, pca")
    final = pca
    if config.distill_enabled:
        score = config.distill.min_teacher_similarity is not None
        pair_stages = {(config.langs[0], lang): run_pairs(lang, paths, config.exclude, teacher, work, score, force,
                                                          quiet, [extracts[config.langs[0]], extracts[lang]])
                       for lang, paths in config.parallel_files().items()}
        stages += [(f"pairs ({a}-{b})", stage) for (a, b), stage in pair_stages.items()]
        alone = None
        if config.distill.alone_shrinkage:
            alone = run_alone(compose, teacher, work, force, quiet)
            stages.append(("alone", alone))
        co_stages: dict[str, list[StageResult]] = {}  # language -> one stage per co-teacher
        for name, _ in config.distill.co_teachers():  # one co-teacher in memory at a time
            co_teacher = load_build_teacher(name, config)
            for lang in config.langs:
                co_stages.setdefault(lang, []).append(run_coteacher(extracts[lang], co_teacher, work, force, quiet))
                stages.append((f"coteacher {name} ({lang})", co_stages[lang][-1]))
            del co_teacher
        final = run_distill(config.distill, pca, compose, extracts, rules, tokenizer_json, work, pair_stages, alone,
                            co_stages, config.seed, config.device, config.checkpoint_seconds, force, quiet)
        stages.append(("distill", final))
        monitor.phase("pairs, distill")
    grams = None
    if config.distill.gram_buckets:
        grams = run_grams(config.distill.gram_buckets, final, compose, work, force, quiet)
        stages.append(("grams", grams))
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
    if grams is not None:
        report["grams"] = {"rows": [len(table), len(table) + config.distill.gram_buckets]}
        table = np.vstack([table, np.load(grams.path / files.GRAMS)])
        labels = labels + [f"<gram {i}>" for i in range(config.distill.gram_buckets)]
    if config.multilingual:
        report["languages"] = {lang: {"rows": span, "tokenization": rules[lang].to_dict()}
                               for lang, span in layout.languages.items()}
    extra = {"word_contexts": contexts}
    if (pca.path / files.PCA).is_file():
        mean, kept, _ = kept_components(pca.path / files.PCA)
        extra.update(pca_mean=mean, pca_components=kept)
    write_model_folder(Path(config.out), table.astype(config.dtype), labels,
                       {**report, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, tokenizer_json, extra,
                       overwrite=overwrite)
    report["build"]["stages"]["export"] = {"wall_s": round(time.time() - export_start, 2), "cached": False,
                                           **({"stats": {f"variant rows {k}": n for k, n in added.items()}}
                                              if added else {})}
    monitor.phase("export")
    report["build"]["device"] = monitor.report()
    report["build"]["total_wall_s"] = round(time.time() - started, 2)
    update_config(Path(config.out), {"build": report["build"]})
    return report
