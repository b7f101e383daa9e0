"""`python -m lab.report`: regenerate the Markdown tables and PNG plots under ``reports/`` from the builds in
``models/``.

Sections (``--only`` picks some; by default every section whose models exist):
* ``english``: the STS suite for our tables, the teachers, the peers and the paper's OURS(256) row, with encode
  speed and table size; a speed-vs-quality plot.
* ``stages``: the paper's Table 6 on the main build.
* ``ablations``: each lever of the main recipe on its own (real builds sharing the cached extract stage), the
  dimension and vocabulary sweeps and the distillation corpus-size curve; levers chosen on STS-B dev only.
* ``robust``: hidden-vocabulary and context-count scores (``swembed.eval.robust``).
* ``analysis``: norms by part of speech per stage (Figure 2), norm-frequency Spearman, PC extremes (Table 8).
* ``ensembles``: ours + WordLlama / model2vec / tokenlearn (paper appendix D), weights chosen on STS-B dev.
* ``multilingual``: the bilingual and multilingual tables against the teacher and the English-only table.

Scores are cached per model folder (``models/.scores``, keyed by the folder's config.json), so a section can be
regenerated without re-encoding everything. Model selection never looks at test sets.

``python -m lab.report --check`` lists every table of ``reports/*.md`` with the command that regenerates it (the
nearest ``<!-- generated: COMMAND -->`` line above it) and fails when a table has none or the command's module or
``swembed`` sub-command does not exist.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from lab import plots
from swembed.eval.sts import DEV, EN_SETS, evaluate_sts

STS_HEADER = [*EN_SETS, "avg (7)", "STS-B dev"]
ABLATION_RECIPE = "lab/pipelines/minilm-256-en.toml"  # the main recipe on ../shared/data/corpora/en only
# The paper's Table 1 row OURS(256), distilled from GTE-base over CC-100 (Wada et al. 2025).
PAPER_OURS_256 = dict(zip(EN_SETS, (68.3, 79.3, 75.9, 83.1, 79.4, 79.2, 68.0)))
PAPER_OURS_256["avg"] = 76.2
# English report: teacher -> its tables (the teacher's row is shown when one of them exists)
TABLE_OF_TEACHER = {"mpnet": ("mpnet-256", "mpnet-256-all", "mpnet-me5-256", "mpnet-gemma-256"),
                    "me5-small": ("me5-en", "mpnet-me5-256", "mpnet-gemma-256"),
                    "embeddinggemma": ("mpnet-gemma-256",)}
GENERATED = "<!-- generated: {command} -->"  # the line above every table in reports/*.md
SECTIONS = ("english", "stages", "ablations", "robust", "analysis", "ensembles", "multilingual")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _section(title: str, intro: str, header: list[str], rows: list[list[str]]) -> list[str]:
    """A report section: heading, one paragraph, a table."""
    return [f"## {title}", "", intro, "", _table(header, rows), ""]


def _provenance(command: str) -> str:
    """The marker ``python -m lab.report --check`` reads, then the date and command for the reader."""
    return (f"{GENERATED.format(command=command)}\n\nGenerated {time.strftime('%Y-%m-%d')} by `{command}` "
            "(Spearman x100 of cosine, as MTEB computes it).")


def _sts_cells(scores: dict) -> list[str]:
    cell = lambda name: f"{scores[name]:.2f}" if name in scores else ""  # noqa: E731
    return [cell(n) for n in EN_SETS] + [f"**{scores['avg']:.2f}**", cell(DEV)]


class Scores:
    """STS scores of model specs, cached on disk by the spec and its folder's config.json."""

    def __init__(self, data: Path, cache: Path) -> None:
        self.data, self.cache = data, cache

    def _key(self, spec: str, extra: str) -> Path:
        folder = Path(spec.removeprefix("model2vec:"))  # a rebuilt or re-exported folder is scored anew
        files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        stamp = "".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns};" for p in files)
        return self.cache / (hashlib.sha256(f"{spec}|{stamp}|{extra}".encode()).hexdigest()[:24] + ".json")

    def cached(self, spec: str, extra: str, compute: Callable[[], dict]) -> dict:
        path = self._key(spec, extra)
        if path.is_file():
            return json.loads(path.read_text())
        scores = compute()
        self.cache.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(scores))
        return scores

    def sts(self, spec: str) -> dict:
        """The seven English sets, their mean and STS-B dev."""
        def compute() -> dict:
            from swembed.eval.models import load_encoder

            return score_encoder(load_encoder(spec, "cpu")[1], self.data)

        return self.cached(spec, "sts", compute)


def score_encoder(encode, data_dir: Path) -> dict:
    scores = evaluate_sts(encode, data_dir, (*EN_SETS, DEV))
    scores["avg"] = float(np.mean([scores[n] for n in EN_SETS]))
    return scores


def _size_mb(folder: Path) -> str:
    path = Path(str(folder).removeprefix("model2vec:"))
    files = [p for p in path.glob("*") if p.suffix in (".npy", ".safetensors") and "pca" not in p.name]
    return f"{sum(p.stat().st_size for p in files) / 2**20:.0f}" if files else ""


def english_report(rows: dict[str, str], scores: Scores, out: Path, command: str, extra: dict[str, dict]) -> dict:
    """STS, speed and size for each labelled model spec (see ``swembed.eval.models``), plus fixed rows."""
    from lab.bench import bench, stsb_texts

    results = {label: scores.sts(spec) for label, spec in rows.items()}
    fast = [spec for spec in rows.values() if not _is_teacher(spec)]
    speed = {row["model"]: row for row in bench(fast, stsb_texts(scores.data), 3.0, cores=1)}
    table = []
    for label, spec in rows.items():
        rate, cpu_rate = (speed.get(spec, {}).get(key) for key in ("sent_per_s", "sent_per_cpu_s"))
        table.append([label, *_sts_cells(results[label]), f"{rate:,.0f}" if rate else "",
                      f"{cpu_rate:,.0f}" if cpu_rate else "", _size_mb(Path(spec))])
    for label, fixed in extra.items():
        table.append([label, *_sts_cells(fixed), "", "", ""])
    text = ["# English STS: ours vs the teachers and the peers", "", _provenance(command), "",
            "Speed: sentences/s encoding STS-B test sentences, one process, same machine, same run "
            "(`python -m lab.bench`): wall clock, and per CPU-second the process used in all its threads (the "
            "comparable figure on a busy machine); teachers are not timed here (a few hundred sentences/s on this "
            "CPU). Size: the table files on disk.", "",
            _table(["model", *STS_HEADER, "sent/s", "sent/CPU-s", "MB"], table), "",
            "tokenlearn (model2vec's corpus recipe) and model2vec `distill` are built from the same teacher with "
            "`python -m lab.baselines` (tokenlearn on 100k sentences sampled with seed 0, from the main "
            "recipe's corpus with the evaluation sentences excluded, and from `en/*.txt.gz` as before; the commands "
            "are in that module's docstring); WordLlama is its shipped l2_supercat 256 table.", "",
            "![speed vs quality](english_speed_quality.png)"]
    (out / "english.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    plots.speed_quality(results, speed, rows, out / "english_speed_quality.png")
    return {"scores": results, "speed": speed}


def _is_teacher(spec: str) -> bool:
    return not spec.startswith("model2vec:") and spec != "wordllama" and not (Path(spec) / "config.json").is_file()


def stages_report(model_dir: Path, data_dir: Path, out: Path, command: str) -> dict:
    """The paper's Table 6: STS after each stage of one build."""
    from lab.stage_table import stage_tables
    from swembed.runtime import StaticEmbedder, load

    model = load(model_dir)
    work_dir = _work_dir(model)
    results = {label: score_encoder(StaticEmbedder(table, model.tokenizer).encode, data_dir)
               for label, table in stage_tables(model_dir, work_dir).items()}
    text = [f"# Stage table (paper Table 6) for `{model_dir}`", "", _provenance(command), "",
            _table(["stage", *STS_HEADER], [[label, *_sts_cells(s)] for label, s in results.items()])]
    (out / "stages.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def _work_dir(model) -> Path:
    config = model.config["build"]["config"]
    return Path(config["work_dir"] or f"{config['out']}.work")


PREVIOUS_RULE = {"back-off to the longest known prefix, no piece rows (previous rule)":
                 {"tokenization": {"oov_backoff": "teacher_prefix"}, "compose": {"pieces": False}}}


def ablations(teacher_dim: int) -> dict[str, dict]:
    """The levers of the ablation table, each changing one setting of the main recipe (compared before KD)."""
    r = teacher_dim // 100
    return {
        **PREVIOUS_RULE,
        "piece rows, back-off to the longest known prefix":
            {"tokenization": {"oov_backoff": "teacher_prefix"}},
        **{f"shrinkage k = {k:g}": {"compose": {"piece_prior": k}} for k in (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)},
        **{f"vocabulary cut: words in >= {n} sentences": {"compose": {"min_contexts": n}} for n in (2, 3, 5)},
        "without ABTT (r = 0)": {"pca": {"drop": 0}},
        "word-level PCA": {"pca": {"level": "word"}},
        "d = 128": {"pca": {"dim": 128}},
        f"d = {teacher_dim - r} (all but r)": {"pca": {"dim": teacher_dim - r}},
    }


# The levers also compared after distillation, each trained for the same fixed budget as the corpus curve.
KD_ABLATIONS = {
    **PREVIOUS_RULE,
    "random KD batches (the paper), not neighbour cells": {"distill": {"cell_size": 0}},
}
KD_SENTENCES = (100_000, 300_000, 500_000)
KD_BUDGET_STEPS = 16_000  # fixed training budget of the KD levers and of each point of the corpus curve
VOCAB_SIZES = (5_000, 10_000, 20_000, 50_000, 100_000)


def variant(base, changes: dict, out: Path):
    """A copy of the build config ``base`` with ``changes`` ({section: {field: value}} or {field: value})."""
    from copy import deepcopy

    config = deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict):
            setattr(config, key, replace(getattr(config, key), **value))
        else:
            setattr(config, key, value)
    config.out = str(out)
    return config


def _slug(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")[:60]


def ablations_report(recipe: Path, scores: Scores, out: Path, models_dir: Path, command: str) -> dict:
    """Each lever alone: every one before distillation (cheap: compose and PCA re-run on the cached extract), the
    main ones after distillation, the distillation corpus-size curve, and the vocabulary size at inference.
    Builds that are missing under ``models_dir/ablations`` are made (the KD ones take the recipe's full training)."""
    from swembed import load
    from swembed.pipeline.build import build
    from swembed.pipeline.config import load_recipe
    from swembed.runtime import StaticEmbedder, WordTokenizer

    base = load_recipe(recipe)
    base.work_dir = str(base.work_path)
    folder = models_dir / "ablations"

    def run(changes: dict, name: str) -> dict:
        target = folder / name
        config = variant(base, changes, target)
        wanted = json.loads(json.dumps({**asdict(config), "name": None}, default=str))
        built = json.loads((target / "config.json").read_text()) if (target / "config.json").is_file() else {}
        if {**built.get("build", {}).get("config", {}), "name": None} != wanted:  # missing, or other settings
            build(config, quiet=True, overwrite=True)
        return scores.sts(str(target))

    results: dict[str, dict] = {}
    main_scores = results["recipe"] = run({}, "recipe")
    main_model = load(folder / "recipe")
    teacher_dim = main_model.config["teacher"]["dim"]
    before = [["the recipe, before KD", *_sts_cells(run({"distill_enabled": False}, "no-kd"))]]
    for label, changes in ablations(teacher_dim).items():
        lever = run({**changes, "distill_enabled": False}, "no-kd-" + _slug(label))
        results[label + " (no KD)"] = lever
        before.append([label, *_sts_cells(lever)])
    after = [["the recipe (`" + str(recipe) + "`), early-stopped", *_sts_cells(main_scores)]]
    budget = {"distill": {"max_steps": KD_BUDGET_STEPS}}
    after.append([f"the recipe, {KD_BUDGET_STEPS:,} steps", *_sts_cells(run(budget, "kd-budget-recipe"))])
    for label, changes in KD_ABLATIONS.items():
        lever = run({key: {**changes.get(key, {}), **budget.get(key, {})} for key in {*changes, *budget}},
                    "kd-budget-" + _slug(label))
        results[label] = lever
        after.append([f"{label}, {KD_BUDGET_STEPS:,} steps", *_sts_cells(lever)])
    curve = []
    encoded = main_model.config["build"]["stages"]["extract"]["stats"]["encoded_sentences"]
    for n in (*KD_SENTENCES, encoded):
        label = f"KD on {n:,} sentences, {KD_BUDGET_STEPS:,} steps"
        changes = {"distill": {"max_sentences": None if n == encoded else n, "max_steps": KD_BUDGET_STEPS}}
        results[label] = run(changes, f"kd-curve-{n}")
        curve.append([f"{n:,}", *_sts_cells(results[label])])
    vocab_rows = []
    words = main_model.words
    for size in (*VOCAB_SIZES, len(words)):
        size = min(size, len(words))
        tok = main_model.tokenizer
        tokenizer = WordTokenizer({w: i for i, w in enumerate(words[:size])}, tok.rules, tok.teacher_tokenizer,
                                  tok.piece_rows)
        vocab_scores = score_encoder(StaticEmbedder(main_model.table, tokenizer).encode, scores.data)
        vocab_rows.append([f"{size:,}", *_sts_cells(vocab_scores)])
    text = ["# Ablations on the MiniLM build", "", _provenance(command), "",
            f"Every row is a real build from `{recipe}` sharing its cached corpus, vocab and extract stages; only the "
            f"named setting differs (r = floor(teacher dim / 100)). Settings are chosen on STS-B dev (last column); "
            "the test columns are reported once. The builds are under `models/ablations/`.", "",
            *_section("Each lever before distillation",
                      "Compose and PCA re-run on the cached extract, no KD: a cheap and clean view of what each "
                      "setting does to the table itself.", ["variant", *STS_HEADER], before),
            *_section("After distillation",
                      f"The recipe's own early-stopped build, then the recipe and the deciding levers each distilled "
                      f"for the same {KD_BUDGET_STEPS:,} steps (batch 128), so that KD's effect on each lever is "
                      "compared at equal cost.", ["variant", *STS_HEADER], after),
            *_section("Distillation corpus size",
                      f"Knowledge distillation on the first N sentences of a seeded shuffle of every encoded sentence "
                      f"(the same held-out sentences for every N), each trained for the same {KD_BUDGET_STEPS:,} "
                      "steps: the gain per added 100k sentences at a fixed training budget.",
                      ["KD sentences", *STS_HEADER], curve),
            *_section("Vocabulary size (Table 9)",
                      "The recipe's table with only its V most frequent words known at inference; the others back off "
                      "as any unknown word does.", ["V", *STS_HEADER], vocab_rows)]
    (out / "ablations.md").write_text("\n".join(text).rstrip() + "\n", encoding="utf-8")
    return results


def robust_report(models: dict[str, Path], data_dir: Path, out: Path, command: str) -> dict:
    from swembed.eval.robust import robust_scores

    results = {label: robust_scores(folder, data_dir) for label, folder in models.items()}
    hidden = ["full avg", "25% hidden avg", "50% hidden avg", "75% hidden avg"]
    rows = [[label, *(f"{s[k]:.2f}" for k in hidden), f"{s['50% hidden avg'] - s['full avg']:+.2f}"]
            for label, s in results.items()]
    buckets = sorted({k for s in results.values() for k in s if k.startswith("contexts")},
                     key=lambda k: int(k.split()[1].split("-")[0].rstrip("+")))
    bucket_rows = [[label, *(f"{s[k]:.2f} ({s['pairs with ' + k]:,} pairs)" if k in s else "" for k in buckets)]
                   for label, s in results.items()]
    text = ["# Robustness: rare and unseen words", "", _provenance(command), "",
            "English STS (mean of 7) with the rarest 25/50/75% of each table's words hidden at inference: their rows "
            "stay, the tokeniser no longer knows them, so the back-off (the teacher's pieces, or a known prefix) must "
            "carry them, as it must for a text full of specialised vocabulary.", "",
            _table(["table", *hidden, "50% hidden - full"], rows), "",
            *_section("By context count",
                      "All pairs of the seven sets pooled (gold rescaled to [0, 1] per set), bucketed by the fewest "
                      "sentences any word of the pair was seen in at build time (0: a word with no row); Spearman x100 "
                      "per bucket.", ["table", *buckets], bucket_rows)]
    (out / "robust.md").write_text("\n".join(text).rstrip() + "\n", encoding="utf-8")
    return results


def analysis_report(model_dir: Path, data_dir: Path, out: Path, command: str) -> dict:
    from lab.analysis import brown_pos, norm_frequency_spearman, norms_by_pos, pc_extremes
    from lab.stage_table import stage_dirs, stage_tables
    from swembed import load
    from swembed.pipeline import files

    model = load(model_dir)
    stages = stage_dirs(model, _work_dir(model))
    words = model.words
    tables = {label: table[: len(words)] for label, table in stage_tables(model_dir, _work_dir(model)).items()}
    counts = np.asarray(model.word_contexts)
    pos = brown_pos(data_dir / "corpora" / "en" / "brown.zip")
    by_pos = {label: norms_by_pos(table, words, pos) for label, table in tables.items()}
    spearman = {label: norm_frequency_spearman(table, counts) for label, table in tables.items()}
    with np.load(stages["pca"] / files.PCA) as pca:
        components, mean = pca["components"], pca["mean"]
    first = next(iter(tables.values()))
    extremes = {k: pc_extremes(first, words, mean, components[k - 1], counts) for k in (1, 2, 6)}
    plots.norms_by_pos(by_pos, out / "norms_by_pos.png")
    classes = sorted({c for v in by_pos.values() for c in v})
    pos_rows = [[label, *(f"{v.get(c, float('nan')):.2f}" for c in classes)] for label, v in by_pos.items()]
    text = ["# Analysis (paper section 5)", "", _provenance(command).rsplit(" (Spearman", 1)[0] + ".", "",
            "## Word-vector norm by part of speech (Figure 2)", "",
            "Mean norm of each class divided by the mean norm of all tagged words; POS = each word's most frequent "
            "Brown-corpus tag.", "", _table(["stage", *classes], pos_rows), "", "![norms by POS](norms_by_pos.png)", "",
            "## Norm vs frequency rank", "", "Spearman between a word's vector norm and its frequency rank "
            "(1 = most frequent, by the sentences it was seen in; positive = rarer words have larger norms).", "",
            _table(["stage", "Spearman"], [[k, f"{v:.3f}"] for k, v in spearman.items()]), "",
            "## Words at the ends of principal components (Table 8)", "",
            "Sentence-level PCs of the composed table (PC1-3 are the ones ABTT drops); words seen in >= 50 sentences.",
            "", _table(["PC", "largest values", "smallest values"],
                       [[f"PC{k}", ", ".join(hi), ", ".join(lo)] for k, (hi, lo) in extremes.items()])]
    (out / "analysis.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return {"norms_by_pos": by_pos, "norm_frequency_spearman": spearman, "pc_extremes": extremes}


ENSEMBLE_WEIGHTS = (1, 2, 3, 4, 6, 8)


def ensembles_report(members: dict[str, str], pairs: list[tuple[str, ...]], scores: Scores, out: Path,
                     models_dir: Path, command: str) -> dict:
    """Each ensemble of labelled ``members`` beside its members alone; the first member's weight w (others 1)
    is chosen from ``ENSEMBLE_WEIGHTS`` on STS-B dev, then the test sets are reported once."""
    from lab.ensemble_weights import dev_by_first_weight, weigh_first
    from swembed import load
    from swembed.integrations.ensemble import build_ensemble

    alone = {label: scores.sts(spec) for label, spec in members.items()}
    rows = [[label, "", *_sts_cells(s)] for label, s in alone.items()]
    results: dict[str, dict] = {"alone": alone}
    for pair in pairs:
        name = " + ".join(pair)
        folder = build_ensemble([members[label] for label in pair], models_dir / name.replace(" ", ""),
                                overwrite=True)
        model = load(folder)
        by_weight = dev_by_first_weight(model, scores.data, ENSEMBLE_WEIGHTS)
        best = max(by_weight, key=by_weight.__getitem__)
        weigh_first(model, best)
        result = score_encoder(model.encode, scores.data)
        results[name] = {"weight": best, "dev_by_weight": by_weight, "scores": result}
        rows.append([name, ":".join([str(best)] + ["1"] * (len(pair) - 1)), *_sts_cells(result)])
    text = ["# Ensembles (paper appendix D)", "", _provenance(command), "",
            "`swembed ensemble A B --weights w,1` concatenates the tables over the union vocabulary; each member's "
            "sub-space is averaged, L2-normalised and scaled by sqrt(w_k / sum w), so cosine = weighted mean of the "
            f"members' cosines (eq. 6-7). The weight w of ours is chosen from {list(ENSEMBLE_WEIGHTS)} on STS-B dev "
            "only. Members alone are scored with their own encoders; inside an ensemble a sub-word member "
            "(WordLlama, model2vec) contributes its encoding of each lower-cased word, and unknown words back off "
            "through ours' teacher pieces and character-gram rows (docs/ensembles.md).", "",
            _table(["model", "weights", *STS_HEADER], rows), "",
            "STS-B dev by weight of ours (others 1):", "",
            _table(["ensemble", *(f"w={w}" for w in ENSEMBLE_WEIGHTS)],
                   [[name, *(f"{r['dev_by_weight'][w]:.2f}" for w in ENSEMBLE_WEIGHTS)]
                    for name, r in results.items() if name != "alone"])]
    (out / "ensembles.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def multilingual_report(models: dict[str, Path], english_only: dict[str, Path], teacher: str | None,
                        scores: Scores, data_dir: Path, out: Path, command: str,
                        exports: dict[str, str] | None = None, sweep: list[Path] | None = None) -> dict:
    """Bilingual and multilingual tables as users encode them (no language named): cross-lingual scores and
    English STS; the teacher, English-only tables and exports (label -> model spec) beside them; the
    contrastive-weight sweep (``sweep``: one pair's builds that differ only in that weight); language-cluster
    silhouettes and plots."""
    from swembed import load
    from swembed.eval.suites import evaluate

    def xling(spec: str) -> dict:
        found = dict(scores.cached(spec, "all", lambda: evaluate(spec, "all", data_dir)[1]))
        found["English avg (7)"] = found.pop("avg")
        return found

    results = {}
    if teacher:
        results[f"teacher {teacher}"] = xling(teacher)
    for label, folder in english_only.items():
        english = scores.sts(str(folder))
        results[f"{label} (English only)"] = {"English avg (7)": english["avg"], "STS-B dev": english[DEV]}
    sil_rows = []
    for label, folder in models.items():
        model = load(folder)
        found = xling(str(folder))
        stages = model.config["build"]["stages"]
        found["build min"] = round(sum(s["wall_s"] for s in stages.values()) / 60, 1)  # cached stages as first run
        found["peak GB"] = round(max(s.get("peak_rss_mb") or 0 for s in stages.values()) / 1024, 1)
        read = sum(s["stats"]["pairs_read"] for name, s in stages.items() if name.startswith("pairs"))
        if read:
            kept = sum(v for k, v in stages["distill"]["stats"].items() if k.startswith("pairs "))
            threshold = model.config["build"]["config"]["distill"]["min_teacher_similarity"]
            found["pairs kept"] = f"{kept:,} of {read:,} (cos >= {threshold})"
        results[label] = found
        for export_label, spec in (exports or {}).items():
            if export_label.startswith(f"{label} "):
                results[export_label] = {k: v for k, v in xling(spec).items() if k in found}  # its table's sets
        silhouettes = stages["pca"]["stats"].get("silhouette", {})
        sil_rows.append([label, *(f"{v:.3f}" for v in silhouettes.values()),
                         f"{stages['pca']['stats']['dropped_variance']:.3f}"])
        projection = _work_dir(model) / stages["pca"]["artifact"] / "projection.npz"
        if projection.is_file():
            plots.languages(projection, model.languages, out / f"languages_{label}.png", label)
    wanted = ["English avg (7)", "STS-B dev", "STS17 en-de", "STSB en-de", "Tatoeba deu acc", "STSB en-zh",
              "Tatoeba cmn acc", "STSB en-ja", "Tatoeba jpn acc", "build min", "peak GB", "pairs kept"]
    columns = [c for c in wanted if any(c in r for r in results.values())]
    cell = lambda v: v if isinstance(v, str) else f"{v:.2f}"  # noqa: E731
    rows = [[name, *(cell(r[c]) if c in r else "" for c in columns)] for name, r in results.items()]
    text = ["# Bilingual and multilingual tables (paper 3.3, 4.4)", "", _provenance(command), "",
            "Every score is taken the way users and exports encode: `encode(texts)` with no language named (each "
            "text's language is identified by script, then by the table's own word frequencies). Cross-lingual STS: "
            "STS17 en-de and STS-B en-xx (s1 English, s2 translated); Tatoeba: retrieval x -> eng accuracy; English: "
            "the mean of the seven English STS sets. Build time (every stage as first run, cached ones included) and "
            "peak memory on this 2-core machine; the parallel pairs "
            "that training kept, of those read, by the teacher's cosine of each pair. An export row is the table as "
            "model2vec loads it (one merged vocabulary, since no language can be named there). Figures from before "
            "each change are in the README's bilingual section.", "",
            _table(["model", *columns], rows), "",
            "## Language clusters (paper footnote 16)", "",
            "Silhouette of the language labels over the sentence vectors (1 = languages fully separated, 0 = mixed), "
            "and the variance share of the r components ABTT drops.", "",
            _table(["table", "before PCA", "PCA without ABTT", "PCA with ABTT", "dropped variance"], sil_rows), "",
            *[f"![{label}](languages_{label}.png)" for label in models]]
    if sweep:
        text += ["", *_weight_sweep(sweep, xling)]
    (out / "multilingual.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def _weight_sweep(folders: list[Path], xling: Callable[[str], dict]) -> list[str]:
    """The contrastive-weight section: per build, its held-out pair retrieval and STS-B dev (what the weight is
    chosen on: their mean, x100 for retrieval), then its test scores. The last folder is the recipe's own table."""
    from swembed import load

    rows = []
    for folder in folders:
        build = load(folder).config["build"]
        weight = build["config"]["distill"]["contrastive_weight"]
        stats = build["stages"]["distill"]["stats"]
        pair = next(k.split()[-1] for k in stats if k.startswith("held-out retrieval"))
        held_out = 100 * stats[f"held-out retrieval {pair}"]
        found = xling(str(folder))
        lang = pair.split("-")[1]
        tatoeba = next(k for k in found if k.startswith("Tatoeba") and k.endswith("acc"))
        rows.append((weight, [f"{weight:g}", f"{held_out:.2f}", f"{found['STS-B dev']:.2f}",
                              f"{(held_out + found['STS-B dev']) / 2:.2f}", f"{found['English avg (7)']:.2f}",
                              f"{found[f'STSB en-{lang}']:.2f}", f"{found[tatoeba]:.2f}"]))
    rows.sort()
    best = max(rows, key=lambda r: float(r[1][3]))[0]
    return ["## Contrastive weight (chosen on held-out data)", "",
            f"Builds of `pipelines/{folders[-1].name}.toml` that differ only in the contrastive weight (`swembed build "
            f"--recipe pipelines/{folders[-1].name}.toml --contrastive-weight W --out models/{folders[-1].name}-cwW`; "
            "the KD weight is 1). "
            "The weight is chosen on the mean of the held-out pair retrieval (translation retrieval among pairs kept "
            "out of training, x100) and STS-B dev; the test columns are shown, not used. Chosen: "
            f"**{best:g}**.", "",
            _table(["contrastive weight", "held-out retrieval", "STS-B dev", "mean (chosen on)", "English avg (7)",
                    "STSB en-xx", "Tatoeba acc"], [r for _, r in rows])]


@dataclass
class _Run:
    """What every section writer reads: the models folder, cached scores, eval data, output folder, command."""

    models_dir: Path
    scores: Scores
    data: Path
    out: Path
    command: str

    def exists(self, name: str) -> bool:
        return (self.models_dir / name / "config.json").is_file()

    @property
    def main(self) -> Path:
        return self.models_dir / "minilm-256-shared"


ENGLISH_ROWS = (("swembed minilm-256-en (the recipe on `en/` only)", "minilm-256-en"),
                ("swembed, previous pipeline (v0)", "v0-minilm-256-shared"),
                ("swembed default build (WikiText-2)", "minilm-256"),
                ("tokenlearn (same teacher, 100k sentences of the recipe's corpus)",
                 "baselines/tokenlearn-minilm-256-shared"),
                ("tokenlearn (same teacher, 100k sentences of `en/*.txt.gz`)", "baselines/tokenlearn-minilm-256"),
                ("model2vec distill", "baselines/model2vec-minilm-256"),
                ("teacher all-mpnet-base-v2", "mpnet"),
                ("**swembed** mpnet-256-all (every sentence through the teacher)", "mpnet-256-all"),
                ("swembed mpnet-256 (the quota's 349k sentences through the teacher)", "mpnet-256"),
                ("**swembed** mpnet-me5-256 (mpnet-256-all, KD also towards e5)", "mpnet-me5-256"),
                ("teacher EmbeddingGemma-300M", "embeddinggemma"),
                ("**swembed** mpnet-gemma-256 (KD towards mpnet, e5 and EmbeddingGemma)", "mpnet-gemma-256"),
                ("teacher multilingual-e5-small", "me5-small"),
                ("swembed me5-en (English-only table from multilingual-e5-small)", "me5-en"))


def _write_english(run: _Run) -> bool:
    if not run.exists("minilm-256-shared"):
        return False
    rows = {"teacher all-MiniLM-L6-v2": "minilm", "**swembed** minilm-256-shared": str(run.main)}
    for label, name in ENGLISH_ROWS:
        if name in TABLE_OF_TEACHER:  # a teacher's row, shown only beside its table
            if any(map(run.exists, TABLE_OF_TEACHER[name])):
                rows[label] = name
        elif run.exists(name):
            rows[label] = ("model2vec:" if name.startswith("baselines") else "") + str(run.models_dir / name)
    rows["WordLlama l2_supercat 256"] = "wordllama"
    english_report(rows, run.scores, run.out, run.command,
                   {"paper OURS(256), GTE-base teacher (Table 1)": PAPER_OURS_256})
    return True


def _write_stages(run: _Run) -> bool:
    if run.exists("minilm-256-shared"):
        stages_report(run.main, run.scores.data, run.out, run.command)
    return run.exists("minilm-256-shared")


def _write_ablations(run: _Run) -> bool:
    ablations_report(Path(ABLATION_RECIPE), run.scores, run.out, run.models_dir, run.command)
    return True


def _write_robust(run: _Run) -> bool:
    if not run.exists("minilm-256-shared"):
        return False
    robust = {name: run.models_dir / name for name in ("minilm-256-shared", "minilm-256-en", "v0-minilm-256-shared",
                                                       "minilm-256", "mpnet-256-all", "mpnet-256") if run.exists(name)}
    robust_report(robust, run.scores.data, run.out, run.command)
    return True


def _write_analysis(run: _Run) -> bool:
    if run.exists("minilm-256-shared"):
        analysis_report(run.main, run.data, run.out, run.command)
    return run.exists("minilm-256-shared")


def _write_ensembles(run: _Run) -> bool:
    if not run.exists("minilm-256-shared"):
        return False
    members = {"ours": str(run.main), "WordLlama": "wordllama"}
    for label, name in (("model2vec", "model2vec-minilm-256"), ("tokenlearn", "tokenlearn-minilm-256")):
        if run.exists(f"baselines/{name}"):
            members[label] = f"model2vec:{run.models_dir / 'baselines' / name}"
    pairs = [("ours", other) for other in members if other != "ours"] + [("ours", "WordLlama", "tokenlearn")]
    pairs = [p for p in pairs if all(label in members for label in p)]
    ensembles_report(members, pairs, run.scores, run.out, run.models_dir / "ensembles", run.command)
    return True


def _write_multilingual(run: _Run) -> bool:
    names = ("me5-en-de", "me5-en-zh", "me5-en-ja", "me5-multi", "me5-en-de-contrastive-only")
    tables = {name: run.models_dir / name for name in names if run.exists(name)}
    if not tables:
        return False
    english_only = {"me5-en": run.models_dir / "me5-en"} if run.exists("me5-en") else {}
    exports = {f"{name} as model2vec (`swembed export --format model2vec`)": f"model2vec:{run.models_dir / name}-m2v"
               for name in tables if (run.models_dir / f"{name}-m2v" / "config.json").is_file()}
    sweep = sorted(p.parent for p in run.models_dir.glob("me5-en-zh-cw*/config.json"))
    if sweep and run.exists("me5-en-zh"):
        sweep.append(run.models_dir / "me5-en-zh")
    multilingual_report(tables, english_only, "me5-small", run.scores, run.data / "eval", run.out, run.command,
                        exports, sweep)
    return True


# each section's writer: it writes reports/<section>.md and says so, or finds its models missing
WRITERS = {"english": _write_english, "stages": _write_stages, "ablations": _write_ablations,
           "robust": _write_robust, "analysis": _write_analysis, "ensembles": _write_ensembles,
           "multilingual": _write_multilingual}


def write_reports(sections: list[str] | None, out: Path, data: Path, command: str, models: str | Path) -> list[str]:
    """Regenerate ``sections`` (default: every one whose models exist) from the builds under ``models``."""
    models_dir = Path(models)
    unknown = set(sections or []) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown report sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    out.mkdir(parents=True, exist_ok=True)
    run = _Run(models_dir, Scores(data / "eval", models_dir / ".scores"), data, out, command)
    todo = sections or [s for s in SECTIONS if s != "ablations"]
    return [f"{section}.md" for section in SECTIONS if section in todo and WRITERS[section](run)]


def _command_exists(command: str) -> str | None:
    """None when ``command`` (``python -m MODULE ...``, ``swembed SUBCOMMAND ...``, ``bash PATH`` or ``node PATH``)
    names a module, sub-command or script that exists here; else why not."""
    import importlib.util

    words = command.split()
    if words[:2] == ["python", "-m"] and len(words) > 2:
        try:
            found = importlib.util.find_spec(words[2]) is not None
        except ModuleNotFoundError:
            found = False
        return None if found else f"no module {words[2]}"
    if words[:1] == ["swembed"] and len(words) > 1:
        from swembed.cli import subcommands

        return None if words[1] in subcommands() else f"no `swembed {words[1]}` command"
    if words[:1] in (["bash"], ["node"]) and len(words) > 1:
        return None if Path(words[1]).is_file() else f"no script {words[1]}"
    return "not a `python -m MODULE`, `swembed COMMAND`, `bash SCRIPT` or `node SCRIPT` command"


def report_tables(folder: Path) -> list[dict]:
    """Every Markdown table under ``folder`` (``*.md``): file, line, its heading and the command above it."""
    marker = re.compile(re.escape(GENERATED).replace(r"\{command\}", "(.+?)"))
    found = []
    for path in sorted(folder.rglob("*.md")):
        command, heading, previous = None, "", ""
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if match := marker.fullmatch(line.strip()):
                command = match.group(1).strip()
            elif line.startswith("#"):
                heading = line.lstrip("#").strip()
            elif line.startswith("|") and not previous.startswith("|"):
                found.append({"file": str(path), "line": number, "heading": heading, "command": command})
            previous = line
    return found


def check(folder: Path) -> int:
    """Print each table with its command; the number of tables without a working one."""
    bad = 0
    for table in report_tables(folder):
        problem = "no generated: marker" if table["command"] is None else _command_exists(table["command"])
        bad += problem is not None
        print(f"{table['file']}:{table['line']} ({table['heading']}): {table['command'] or '-'}"
              + (f"  <- {problem}" if problem else ""))
    return bad


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    from swembed.eval.suites import data_dir

    p = argparse.ArgumentParser(prog="python -m lab.report", description=__doc__.split("\n")[0])
    p.add_argument("--data", help="the shared data folder with eval/ and corpora/ (default $SWEMBED_DATA)")
    p.add_argument("--models", default="models", help="where the reported builds are (default models/)")
    p.add_argument("--out", default="reports")
    p.add_argument("--only", help=f"comma-separated sections of {', '.join(SECTIONS)} "
                                  "(default: all whose models exist, but ablations)")
    p.add_argument("--check", action="store_true", help="list each table of --out with its command; exit 1 when a "
                                                         "table has none or its command does not exist")
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    args = p.parse_args(argv)
    if args.check:
        bad = check(Path(args.out))
        if bad:
            print(f"{bad} table(s) without a command that exists", file=sys.stderr)
        return 1 if bad else 0
    try:
        written = write_reports(args.only.split(",") if args.only else None, Path(args.out),
                                data_dir(args.data, sub="."), "python -m lab.report " + " ".join(argv), args.models)
    except (ValueError, OSError) as exc:
        print(f"python -m lab.report: error: {exc}", file=sys.stderr)
        return 2
    print(f"reports written to {args.out}/: {', '.join(written)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
