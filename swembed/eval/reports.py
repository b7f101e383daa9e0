"""`swembed report`: regenerate every Markdown table and PNG plot under ``reports/`` from one command.

Sections (each can be run alone with ``--only``):
* ``english``: the STS suite for ours, the teacher and the peers, with encode speed; speed-vs-quality plot.
* ``stages``: the paper's Table 6 on our build.
* ``ablations``: no ABTT, word-level PCA, distillation without PCA, output dimension, vocabulary size.
* ``analysis``: norms by part of speech per stage (Figure 2), norm-frequency Spearman, PC extremes (Table 8).
* ``ensembles``: ours + WordLlama / model2vec / tokenlearn (paper appendix D), weights chosen on STS-B dev.

Ablation variants are real builds in the same work directory: they reuse the cached corpus, vocab
and extract stages and re-run only PCA/distill. Model selection never looks at test sets.
"""
from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np

from swembed.eval.sts import EN_SETS, evaluate_sts

DEV = "STSBenchmark-dev"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _provenance(command: str) -> str:
    return f"Generated {time.strftime('%Y-%m-%d')} by `{command}` (Spearman x100 of cosine, as MTEB computes it)."


def _sts_cells(scores: dict) -> list[str]:
    return [f"{scores[n]:.2f}" for n in EN_SETS] + [f"**{scores['avg']:.2f}**", f"{scores[DEV]:.2f}"]


STS_HEADER = [*EN_SETS, "avg (7)", "STS-B dev"]


def score_encoder(encode, data_dir: Path) -> dict:
    scores = evaluate_sts(encode, data_dir / "eval", (*EN_SETS, DEV))
    scores["avg"] = float(np.mean([scores[n] for n in EN_SETS]))
    return scores


def english_report(models: dict[str, str], data_dir: Path, out: Path, command: str) -> dict:
    """STS and speed for each labelled model spec (see ``swembed.eval.models``)."""
    from swembed.eval.bench import bench, stsb_texts
    from swembed.eval.models import load_encoder

    results = {label: score_encoder(load_encoder(spec, "cpu")[1], data_dir) for label, spec in models.items()}
    speed = {row["model"]: row for row in bench(list(models.values()), stsb_texts(data_dir / "eval"), 3.0)}
    rows = []
    for label, spec in models.items():
        s = speed.get(spec, {})
        rows.append([label, *_sts_cells(results[label]), f"{s.get('sent_per_s', float('nan')):,.0f}"])
    text = ["# English STS: ours vs the teacher and the peers", "", _provenance(command), "",
            "Speed: sentences/s encoding STS-B test sentences, one process, same machine, same run (`swembed bench`).",
            "", _table(["model", *STS_HEADER, "sent/s"], rows), "",
            "tokenlearn (model2vec's corpus recipe) is built with `python -m swembed.eval.baselines` (100k sentences "
            "sampled from `corpora/en/*.txt.gz`, seed 0) and joins this table when "
            "`models/baselines/tokenlearn-minilm-256` exists; `../shared/data/README.md` reports 73.57 for another "
            "100k-sentence sample of the same corpus.", "",
            "![speed vs quality](english_speed_quality.png)"]
    (out / "english.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    _scatter(results, speed, models, out / "english_speed_quality.png")
    return {"scores": results, "speed": speed}


def _scatter(results: dict, speed: dict, models: dict[str, str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    for label, spec in models.items():
        rate = speed.get(spec, {}).get("sent_per_s")
        if rate:
            ax.scatter(rate, results[label]["avg"], s=60)
            ax.annotate(label, (rate, results[label]["avg"]), textcoords="offset points", xytext=(6, 4), fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("sentences / second, one CPU process (log scale)")
    ax.set_ylabel("STS average of 7 (Spearman x100)")
    ax.set_title("Speed vs quality on English STS")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def stages_report(model_dir: Path, work_dir: Path, data_dir: Path, out: Path, command: str) -> dict:
    """The paper's Table 6: STS after each stage of one build."""
    from swembed.eval.stage_table import stage_tables
    from swembed.runtime import StaticEmbedder, load

    model = load(model_dir)
    results = {label: score_encoder(StaticEmbedder(table, model.tokenizer).encode, data_dir)
               for label, table in stage_tables(model_dir, work_dir).items()}
    text = [f"# Stage table (paper Table 6) for `{model_dir}`", "", _provenance(command), "",
            _table(["stage", *STS_HEADER], [[label, *_sts_cells(scores)] for label, scores in results.items()])]
    (out / "stages.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def ablations(teacher_dim: int) -> dict[str, dict]:
    """The variants of the ablation table for a teacher of ``teacher_dim`` dimensions."""
    r = teacher_dim // 100
    return {
        "ours (sentence PCA, ABTT, KD)": {},
        "without ABTT (r = 0)": {"pca": {"drop": 0}},
        "word-level PCA": {"pca": {"level": "word"}},
        f"KD without PCA ({teacher_dim}-d raw table)": {"pca": {"level": "none", "dim": teacher_dim}},
        "PCA with ABTT, no KD": {"distill_enabled": False},
        "d = 64": {"pca": {"dim": 64}},
        "d = 128": {"pca": {"dim": 128}},
        f"d = {teacher_dim - r} (all but r)": {"pca": {"dim": teacher_dim - r}},
    }


VOCAB_SIZES = (5_000, 10_000, 20_000, 50_000, 100_000)


def _variant(base, changes: dict, out: Path):
    config = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict):
            for name, item in value.items():
                setattr(getattr(config, key), name, item)
        else:
            setattr(config, key, value)
    config.out = str(out)
    return config


def ablations_report(recipe: Path, work_dir: Path, data_dir: Path, out: Path, models_dir: Path, command: str) -> dict:
    from swembed import load
    from swembed.pipeline.build import build, load_recipe
    from swembed.runtime import StaticEmbedder, WordTokenizer

    base = load_recipe(recipe)
    base.work_dir = str(work_dir)
    results, rows = {}, []
    base.out = str(models_dir / "main")
    build(base, quiet=True)
    main_model = load(base.out)
    for number, (label, changes) in enumerate(ablations(main_model.config["teacher"]["dim"]).items()):
        target = models_dir / f"variant-{number}"
        build(_variant(base, changes, target), quiet=True)
        model = load(target)
        results[label] = score_encoder(model.encode, data_dir)
        rows.append([label, str(model.dim), *_sts_cells(results[label])])
    vocab_rows = []
    words = main_model.words
    for size in (*VOCAB_SIZES, len(words)):
        size = min(size, len(words))
        tokenizer = WordTokenizer({w: i for i, w in enumerate(words[:size])}, main_model.tokenizer.rules,
                                  main_model.tokenizer.subword_tokenizer)
        scores = score_encoder(StaticEmbedder(np.asarray(main_model.table[:size]), tokenizer).encode, data_dir)
        results[f"vocab {size}"] = scores
        vocab_rows.append([f"{size:,}", *_sts_cells(scores)])
    text = ["# Ablations on the MiniLM build", "", _provenance(command), "",
            "Each row is a real build sharing the cached corpus/vocab/extract stages of "
            f"`{recipe}`; only the named setting differs (r = floor(teacher dim / 100)).", "",
            _table(["variant", "dim", *STS_HEADER], rows), "",
            "## Vocabulary size (Table 9)", "",
            "The main table truncated to its V most frequent words; dropped words fall back to their sub-word "
            "prefixes at inference, as any OOV word does.", "",
            _table(["V", *STS_HEADER], vocab_rows)]
    (out / "ablations.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def analysis_report(model_dir: Path, work_dir: Path, data_dir: Path, out: Path, command: str) -> dict:
    from swembed import load
    from swembed.eval.analysis import brown_pos, norm_frequency_spearman, norms_by_pos, pc_extremes
    from swembed.eval.stage_table import stage_dirs, stage_tables

    model = load(model_dir)
    stages = stage_dirs(model, work_dir)
    vocab_rows = (stages["vocab"] / "vocab.tsv").read_text(encoding="utf-8").split("\n")[:-1]
    words = [row.split("\t")[0] for row in vocab_rows]
    counts = np.array([int(row.split("\t")[1]) for row in vocab_rows])
    tables = stage_tables(model_dir, work_dir)
    pos = brown_pos(data_dir / "corpora" / "en" / "brown.zip")
    by_pos = {label: norms_by_pos(table, words, pos) for label, table in tables.items()}
    spearman = {label: norm_frequency_spearman(table, counts) for label, table in tables.items()}
    with np.load(stages["pca"] / "pca.npz") as pca:
        components = np.concatenate([pca["dropped"], pca["components"]])
        mean = pca["mean"]
    extremes = {k: pc_extremes(tables["after extract (3.1)"], words, mean, components[k - 1], counts) for k in (1, 2, 6)}
    _pos_plot(by_pos, out / "norms_by_pos.png")
    classes = sorted({c for v in by_pos.values() for c in v})
    pos_rows = [[label, *(f"{v.get(c, float('nan')):.2f}" for c in classes)] for label, v in by_pos.items()]
    text = ["# Analysis (paper section 5)", "", _provenance(command).replace(
        " (Spearman x100 of cosine, as MTEB computes it)", ""), "",
        "## Word-vector norm by part of speech (Figure 2)", "",
        "Mean norm of each class divided by the mean norm of all tagged words; POS = each word's most frequent "
        "Brown-corpus tag.", "", _table(["stage", *classes], pos_rows), "", "![norms by POS](norms_by_pos.png)", "",
        "## Norm vs frequency rank", "", "Spearman between a word's vector norm and its frequency rank "
        "(1 = most frequent; positive = rarer words have larger norms).", "",
        _table(["stage", "Spearman"], [[k, f"{v:.3f}"] for k, v in spearman.items()]), "",
        "## Words at the ends of principal components (Table 8)", "",
        "Sentence-level PCs of the extracted table (PC1-3 are the ones ABTT drops); words seen >= 50 times.", "",
        _table(["PC", "largest values", "smallest values"],
               [[f"PC{k}", ", ".join(hi), ", ".join(lo)] for k, (hi, lo) in extremes.items()])]
    (out / "analysis.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return {"norms_by_pos": by_pos, "norm_frequency_spearman": spearman, "pc_extremes": extremes}


def _pos_plot(by_pos: dict[str, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = sorted({c for v in by_pos.values() for c in v}, key=lambda c: by_pos[list(by_pos)[-1]].get(c, 0))
    width = 0.8 / len(by_pos)
    fig, ax = plt.subplots(figsize=(10, 4.5), dpi=120)
    for i, (label, values) in enumerate(by_pos.items()):
        ax.bar(np.arange(len(classes)) + i * width, [values.get(c, np.nan) for c in classes], width, label=label)
    ax.set_xticks(np.arange(len(classes)) + width * (len(by_pos) - 1) / 2, classes, rotation=30, ha="right")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_ylabel("mean norm / mean norm of all words")
    ax.set_title("Word-vector norm by part of speech at each stage")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


ENSEMBLE_WEIGHTS = (1, 2, 3, 4, 6, 8)


def ensembles_report(members: dict[str, str], pairs: list[tuple[str, ...]], data_dir: Path, out: Path,
                     models_dir: Path, command: str) -> dict:
    """Each ensemble of labelled ``members`` beside its members alone; the first member's weight w (others 1)
    is chosen from ``ENSEMBLE_WEIGHTS`` on STS-B dev, then the test sets are reported once."""
    from swembed import load
    from swembed.ensemble import build_ensemble
    from swembed.eval.models import load_encoder

    alone = {label: score_encoder(load_encoder(spec, "cpu")[1], data_dir) for label, spec in members.items()}
    rows = [[label, "", *_sts_cells(scores)] for label, scores in alone.items()]
    results: dict[str, dict] = {"alone": alone}
    for pair in pairs:
        name = " + ".join(pair)
        folder = build_ensemble([members[label] for label in pair], models_dir / name.replace(" ", ""))
        model = load(folder)
        by_weight = {}
        for w in ENSEMBLE_WEIGHTS:
            for i, subspace in enumerate(model.config["ensemble"]["subspaces"]):
                subspace["weight"] = float(w if i == 0 else 1)
            by_weight[w] = evaluate_sts(model.encode, data_dir / "eval", (DEV,))[DEV]
        best = max(by_weight, key=by_weight.get)
        for i, subspace in enumerate(model.config["ensemble"]["subspaces"]):
            subspace["weight"] = float(best if i == 0 else 1)
        scores = score_encoder(model.encode, data_dir)
        results[name] = {"weight": best, "dev_by_weight": by_weight, "scores": scores}
        rows.append([name, ":".join([str(best)] + ["1"] * (len(pair) - 1)), *_sts_cells(scores)])
    text = ["# Ensembles (paper appendix D)", "", _provenance(command), "",
            "`swembed ensemble A B --weights w,1` concatenates the tables over the union vocabulary; each member's "
            "sub-space is averaged, L2-normalised and scaled by sqrt(w_k / sum w), so cosine = weighted mean of the "
            f"members' cosines (eq. 6-7). The weight w of ours is chosen from {list(ENSEMBLE_WEIGHTS)} on STS-B dev "
            "only. Members alone are scored with their own encoders; inside an ensemble a sub-word member "
            "(WordLlama, model2vec) contributes its encoding of each lower-cased word, which costs it some quality "
            "(WordLlama alone through words: see the closing note of issue 6).", "",
            _table(["model", "weights", *STS_HEADER], rows), "",
            "STS-B dev by weight of ours (others 1):", "",
            _table(["ensemble", *(f"w={w}" for w in ENSEMBLE_WEIGHTS)],
                   [[name, *(f"{r['dev_by_weight'][w]:.2f}" for w in ENSEMBLE_WEIGHTS)]
                    for name, r in results.items() if name != "alone"])]
    (out / "ensembles.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def multilingual_report(models: dict[str, Path], data_dir: Path, out: Path, command: str,
                        teacher_scores: dict[str, dict] | None = None) -> dict:
    """Bilingual tables: cross-lingual scores and English STS after the cross-lingual PCA and after the
    contrastive stage, the silhouette of the language clusters (paper footnote 16) and a 2-D picture of
    the sentence vectors before PCA, after PCA without ABTT and with ABTT (paper Figure 1)."""
    from swembed import load
    from swembed.eval.stage_table import stage_dirs
    from swembed.eval.xling import evaluate_xling
    from swembed.runtime import StaticEmbedder

    results, sil_rows = {}, []
    columns: list[str] = []
    for label, folder in models.items():
        model = load(folder)
        build = model.config["build"]
        work_dir = Path(build["config"]["work_dir"] or f"{build['config']['out']}.work")
        stages = stage_dirs(model, work_dir)
        variants = {"cross-lingual PCA": np.load(stages["crosspca"] / "table.npy")}
        if "contrastive" in stages:
            variants["+ contrastive"] = np.load(stages["contrastive"] / "table.npy")
        for stage, table in variants.items():
            variant = StaticEmbedder(table, model.tokenizer, model.config, None, model.tokenizers)
            scores = evaluate_xling(lambda texts, lang, v=variant: v.encode(texts, lang=lang), data_dir / "eval",
                                    languages=model.languages)
            english = score_encoder(lambda texts, v=variant: v.encode(texts, lang="en"), data_dir)
            scores["English STS avg (7)"] = round(english["avg"], 2)
            results[f"{label} / {stage}"] = scores
            columns += [c for c in scores if c not in columns]
        stats = model.config["build"]["stages"]["crosspca"]["stats"]
        sil_rows.append([label, *(f"{v:.3f}" for v in stats["silhouette"].values()), f"{stats['dropped_variance']:.3f}"])
        _language_plot(stages["crosspca"] / "projection.npz", model.languages, out / f"languages_{label}.png", label)
    teacher_scores = teacher_scores or {}
    for label, scores in teacher_scores.items():
        columns += [c for c in scores if c not in columns]
    rows = [[name, *(f"{scores[c]:.2f}" if c in scores else "" for c in columns)]
            for name, scores in {**teacher_scores, **results}.items()]
    text = ["# Bilingual tables (paper 3.3, 4.4)", "", _provenance(command), "",
            "Cross-lingual STS (STS17 en-de, STS-B en-xx: s1 English, s2 translated), Tatoeba retrieval x -> eng "
            "(accuracy and MTEB's weighted F1), and English STS (7-set average) to show monolingual quality "
            "before and after the contrastive stage. Each table is evaluated only on the languages it has.", "",
            _table(["model / stage", *columns], rows), "",
            "## Language clusters (paper footnote 16)", "",
            "Silhouette of the language labels over the sentence vectors (1 = languages fully separated, 0 = "
            "mixed), and the variance share of the r components ABTT drops.", "",
            _table(["table", "before PCA", "PCA without ABTT", "PCA with ABTT", "dropped variance"], sil_rows), "",
            *[f"![{label}](languages_{label}.png)" for label in models]]
    (out / "multilingual.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return results


def _language_plot(projection: Path, languages: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with np.load(projection) as data:
        views = {"before PCA": data["before"], "PCA without ABTT": data["no_abtt"], "PCA with ABTT": data["with_abtt"]}
        labels = data["labels"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), dpi=110)
    for ax, (name, xy) in zip(axes, views.items()):
        for number, lang in enumerate(languages):
            mask = labels == number
            ax.scatter(xy[mask, 0], xy[mask, 1], s=4, alpha=0.5, label=lang)
        ax.set_title(name)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].legend(markerscale=4)
    fig.suptitle(f"{title}: sentence vectors by language, first two components")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
