"""`swembed build`: the one build driver, for one language or several.

Per language: corpus -> vocab -> extract (cached per language, so English is extracted once for every
table that has it). Then, over all languages: compose -> pca -> (alone) -> distill -> script variants
(``swembed.pipeline.variants``) -> the model folder -> (query weights, ``swembed.pipeline.query_weights``;
lexical weights, ``swembed.pipeline.lexical_weights``). Every stage is cached under the work directory by the hash
of its config and inputs, and resumes after a crash.
"""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from swembed._version import __version__
from swembed.pipeline import files
from swembed.pipeline.alone import ALONE
from swembed.pipeline.compose import Layout, run_compose
from swembed.pipeline.config import BuildConfig
from swembed.pipeline.corpus import run_corpus
from swembed.pipeline.coteacher import COTEACHER
from swembed.pipeline.distill import DistillInputs, run_distill
from swembed.pipeline.extract import Selection, extract_identity, run_extract
from swembed.pipeline.grams import GRAM_ROWS
from swembed.pipeline.lexical_weights import fit_lexical_weights
from swembed.pipeline.paragraphs import PARAGRAPHS
from swembed.pipeline.parallel import run_pairs
from swembed.pipeline.pca import check_dims, kept_components, run_pca
from swembed.pipeline.plan import DeviceMonitor, build_plan
from swembed.pipeline.query_weights import fit_query_weights
from swembed.pipeline.retrieval import RETRIEVAL
from swembed.pipeline.row_weights import add_row_weights, run_row_weights
from swembed.pipeline.shrinkage import SHRINKAGE
from swembed.pipeline.sources import CorpusError
from swembed.pipeline.stage import PostTraining, PrepareSources, StageContext, StageResult, teacher_key
from swembed.pipeline.variants import add_variants
from swembed.pipeline.vocab import run_vocab
from swembed.runtime.folder import update_config, write_model_folder
from swembed.runtime.tokenizer import TokenizationRules
from swembed.teachers.base import Teacher

logger = logging.getLogger(__name__)

# the stages on the written folder, in order: (recipe section, kind_weights kind, fit)
ROW_WEIGHT_STAGES = (("query_weights", "query", fit_query_weights), ("lexical_weights", "lexical", fit_lexical_weights))

# The stages around training, each reading its own config section (BuildConfig.<section>), in the order they run:
# prepare hooks before training, refine hooks on the trained table (shrinkage before alone), rows after it.
POST_TRAINING: tuple[PostTraining, ...] = (SHRINKAGE, ALONE, COTEACHER, PARAGRAPHS, RETRIEVAL, GRAM_ROWS)


def post_training(config: BuildConfig, stages: tuple[PostTraining, ...] = POST_TRAINING,
                  ) -> list[tuple[PostTraining, object]]:
    """The post-training ``stages`` (the registered ones unless given) this build's settings turn on, each with its
    config section. Their prepare, targets, objectives and refine hooks run only with distillation (they feed and
    refine training); rows follow whatever table the build ends with."""
    sections = [(step, step.settings(config)) for step in stages]
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
                        precision=config.extract.teacher_dtype, runtime=config.extract.teacher_runtime)


def build(config: BuildConfig, force: bool = False, quiet: bool = False, overwrite: bool = False, *,
          post_training_stages: tuple[PostTraining, ...] = POST_TRAINING, checked: bool = False) -> dict:
    """Run the whole pipeline; returns the build report (also saved in the model's config.json).
    ``post_training_stages``: the stages around training, ``POST_TRAINING`` unless given (an experiment's own).
    ``checked``: the caller has run ``config.check_before_work`` (the CLI and ``swembed.build`` do, through
    ``make_build_config`` and ``check_inputs``), so the settings are validated once."""
    from swembed.teachers import resolve_teacher

    if not checked:
        config.check_before_work(overwrite)
    started = time.time()
    for name, _ in config.coteacher.pairs() if config.distill_enabled else []:
        resolve_teacher(name)  # a missing co-teacher fails now, not after extraction
    teacher = load_build_teacher(config.teacher, config)
    ctx = StageContext(config.work_path, config.device, config.seed, force, quiet, config.checkpoint_seconds)
    with DeviceMonitor(teacher.device) as monitor:  # its sampling thread ends even if a stage raises
        run = BuildRun(ctx, config, teacher, monitor, post_training(config, post_training_stages),
                       teacher.tokenizer_json(), {lang: config.rules(lang) for lang in config.langs})
        return _build(run, started, overwrite)


@dataclass
class BuildRun:
    """One build under way: its stage context, settings, teacher, device monitor, the post-training stages it
    runs (with their sections), the teacher's tokenizer, each language's tokenisation rules, and the stages
    finished so far (by their name in the report)."""

    ctx: StageContext
    config: BuildConfig
    teacher: Teacher
    monitor: DeviceMonitor
    post: list[tuple[PostTraining, object]]
    tokenizer_json: str
    rules: dict[str, TokenizationRules]
    stages: list[tuple[str, StageResult]] = field(default_factory=list)


def _build(run: BuildRun, started: float, overwrite: bool) -> dict:
    """The stages in order, then the model folder."""
    config = run.config
    check_dims(config.pca, run.teacher.dim)
    corpora, vocabs = _corpora_and_vocabs(run)
    extracts, plan = _plan_and_extract(run, corpora, vocabs)
    compose = run_compose(run.ctx, config.compose, {lang: (run.rules[lang], vocabs[lang], extracts[lang])
                                                    for lang in config.langs}, run.tokenizer_json)
    pca = run_pca(run.ctx, config.pca, compose, extracts, run.rules, run.tokenizer_json, corpora)
    run.stages += [("compose", compose), ("pca", pca)]
    run.monitor.phase("compose, pca")
    final = _distill(run, corpora, extracts, compose, pca) if config.distill_enabled else pca
    extra_rows = []  # (section, stage, rows, labels)
    for step, section in run.post:
        if step.rows:
            extra_rows.append((step.section, *step.rows(run.ctx, section, final, compose)))
            run.stages.append((step.section, extra_rows[-1][1]))
    report = _export(run, plan, pca, compose, np.load(final.path / files.TABLE), extra_rows, overwrite)
    run.monitor.phase("export")
    for section, kind, fit in ROW_WEIGHT_STAGES:  # on the written folder: fitted on pairs, one weight a row
        settings = getattr(config, section)
        if settings.files:
            weights = run_row_weights(run.ctx, section, kind, settings, Path(config.out),
                                      [final, *(stage for _, stage, _, _ in extra_rows)], config.exclude, fit)
            add_row_weights(Path(config.out), kind, weights)
            report["build"]["stages"].update(stage_summary([(section, weights)]))
            run.monitor.phase(section.replace("_", " "))
    report["build"]["device"] = run.monitor.report()
    report["build"]["total_wall_s"] = round(time.time() - started, 2)
    update_config(Path(config.out), {"build": report["build"]})
    return report


def _corpora_and_vocabs(run: BuildRun) -> tuple[dict[str, StageResult], dict[str, StageResult]]:
    """Each language's corpus stage (refused when too small for the build) and vocab stage."""
    config, corpora, vocabs = run.config, {}, {}
    for lang in config.langs:
        corpus = run_corpus(run.ctx, config.corpus_for(lang), run.rules[lang].unicode_normalization, config.exclude)
        needed = max(2 * config.distill.batch_size if config.distill_enabled else 0, config.pca.dim + 1)
        if corpus.stats["kept"] < needed:
            raise CorpusError(f"the {lang} corpus has {corpus.stats['kept']} usable sentences; this build needs at "
                              f"least {needed} (PCA to {config.pca.dim} dims, distillation batches of "
                              f"{config.distill.batch_size})")
        corpora[lang] = corpus
        vocabs[lang] = run_vocab(run.ctx, config.vocab, run.rules[lang], corpus, run.tokenizer_json)
    return corpora, vocabs


def _plan_and_extract(run: BuildRun, corpora: dict[str, StageResult],
                      vocabs: dict[str, StageResult]) -> tuple[dict[str, StageResult], dict]:
    """Each language's sentence selection (unless its extract is cached), the plan printed, then each extract."""
    config, ctx, teacher = run.config, run.ctx, run.teacher
    cached_extracts, selections = {}, {}
    for lang in config.langs:
        identity = extract_identity(config.extract, run.rules[lang], teacher, config.seed)
        cached_extracts[lang] = ctx.cached("extract", identity, [corpora[lang], vocabs[lang]])
        selections[lang] = None if cached_extracts[lang] else Selection.make(
            config.extract, run.rules[lang], corpora[lang], vocabs[lang], teacher, config.seed)
    vocab_sizes = {lang: vocabs[lang].stats["vocab_size"] for lang in config.langs}
    later = [line for step, section in run.post if step.plan and config.distill_enabled
             for line in step.plan(section, sum(vocab_sizes.values()))]
    later += [f"on the written table, the {kind} weights fitted on the pairs of {len(files)} file(s) "
              f"([{section}]; no teacher time, about a minute per 100k pairs)"
              for section, kind, _ in ROW_WEIGHT_STAGES if (files := getattr(config, section).files)]
    plan = build_plan(config, teacher, selections, vocab_sizes, tuple(later))
    print(plan["text"], file=sys.stderr, flush=True)
    run.monitor.phase("corpus, vocab, plan")
    extracts = {}
    for lang in config.langs:
        extracts[lang] = cached_extracts[lang] or run_extract(
            ctx, config.extract, run.rules[lang], corpora[lang], vocabs[lang],
            cast(Selection, selections[lang]), teacher)  # made above for each language not cached
        selections[lang] = None  # its texts are no longer needed
        suffix = f" ({lang})" if config.multilingual else ""
        run.stages += [(f"corpus{suffix}", corpora[lang]), (f"vocab{suffix}", vocabs[lang]),
                       (f"extract{suffix}", extracts[lang])]
    run.monitor.phase("extract")
    return extracts, plan


def _distill(run: BuildRun, corpora: dict[str, StageResult], extracts: dict[str, StageResult],
             compose: StageResult, pca: StageResult) -> StageResult:
    """The parallel pairs' stages, the post-training stages' prepared stages, then the distill stage."""
    config, ctx, teacher = run.config, run.ctx, run.teacher
    score = config.distill.min_teacher_similarity is not None
    first = config.langs[0]
    pair_stages = {(first, lang): run_pairs(ctx, lang, paths, config.exclude, teacher, score,
                                            [extracts[first], extracts[lang]])
                   for lang, paths in config.parallel_files().items()}
    run.stages += [(f"pairs ({a}-{b})", stage) for (a, b), stage in pair_stages.items()]
    sources = PrepareSources(teacher, compose, extracts, lambda name: load_build_teacher(name, config), corpora,
                             config.exclude)
    prepared = {step.section: step.prepare(ctx, section, sources) for step, section in run.post if step.prepare}
    run.stages += [(label, stage) for items in prepared.values() for label, _, stage in items]
    final = run_distill(ctx, config.distill, DistillInputs(pca, compose, extracts, run.rules, run.tokenizer_json,
                                                           pair_stages, prepared, run.post, corpora))
    run.stages.append(("distill", final))
    run.monitor.phase("pairs, distill")
    return final


def _export(run: BuildRun, plan: dict, pca: StageResult, compose: StageResult, table: np.ndarray,
            extra_rows: list[tuple], overwrite: bool) -> dict:
    """The model folder: the final table (pruned, script variants added, extra rows after it) and its report."""
    config, rules = run.config, run.rules
    if config.lexicon_top_k:
        table = prune_top_k(table, config.lexicon_top_k)
    export_start = time.time()
    layout = Layout.read(compose.path)
    contexts = np.load(compose.path / files.WORD_CONTEXTS)
    variants = {lang: name for lang, name in config.script_variants.items() if lang in config.langs}
    added: dict[str, int] = {}
    if variants:
        from tokenizers import Tokenizer

        tokenizers = layout.tokenizers(rules, Tokenizer.from_str(run.tokenizer_json))
        layout, table, contexts, added = add_variants(layout, table, contexts, tokenizers, variants)
    report: dict[str, Any] = {
        "teacher": teacher_key(run.teacher),
        "dim": int(table.shape[1]),
        "abtt_dropped": pca.stats.get("drop"),
        "tokenization": rules[config.langs[0]].to_dict(),
        "swembed_version": __version__,
        "build": {"config": asdict(config), "plan": plan["numbers"], "stages": stage_summary(run.stages)},
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
                       {**report, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}, run.tokenizer_json, extra,
                       overwrite=overwrite, inputs=config.input_paths())
    report["build"]["stages"]["export"] = {"wall_s": round(time.time() - export_start, 2), "cached": False,
                                           **({"stats": {f"variant rows {k}": n for k, n in added.items()}}
                                              if added else {})}
    return report
