"""The PNG figures of ``python -m lab.report`` (matplotlib, drawn off-screen)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np


@contextmanager
def _figure(path: Path, **subplots):
    """A new figure and its axes; laid out, saved to ``path`` and closed on exit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(**subplots)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)


def speed_quality(results: dict, speed: dict, models: dict[str, str], path: Path) -> None:
    """STS average against encoding speed, one labelled point per model."""
    with _figure(path, figsize=(7.5, 4.8), dpi=120) as (_, ax):
        for label, spec in models.items():
            rate = speed.get(spec, {}).get("sent_per_s")
            if rate:
                ax.scatter(rate, results[label]["avg"], s=60)
                ax.annotate(label, (rate, results[label]["avg"]), textcoords="offset points", xytext=(6, 4),
                            fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("sentences / second, one CPU process (log scale)")
        ax.set_ylabel("STS average of 7 (Spearman x100)")
        ax.set_title("Speed vs quality on English STS")
        ax.grid(True, which="both", alpha=0.3)


def norms_by_pos(by_pos: dict[str, dict[str, float]], path: Path) -> None:
    """Relative word-vector norm per part of speech, one bar group per stage (paper Figure 2)."""
    classes = sorted({c for v in by_pos.values() for c in v}, key=lambda c: by_pos[list(by_pos)[-1]].get(c, 0))
    width = 0.8 / len(by_pos)
    with _figure(path, figsize=(10, 4.5), dpi=120) as (_, ax):
        for i, (label, values) in enumerate(by_pos.items()):
            ax.bar(np.arange(len(classes)) + i * width, [values.get(c, np.nan) for c in classes], width, label=label)
        ax.set_xticks(np.arange(len(classes)) + width * (len(by_pos) - 1) / 2, classes, rotation=30, ha="right")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_ylabel("mean norm / mean norm of all words")
        ax.set_title("Word-vector norm by part of speech at each stage")
        ax.legend(fontsize=8)


def languages(projection: Path, languages: list[str], path: Path, title: str) -> None:
    """Sentence vectors by language on their first two components, before PCA and after it without/with ABTT."""
    with np.load(projection) as data:
        views = {"before PCA": data["before"], "PCA without ABTT": data["no_abtt"], "PCA with ABTT": data["with_abtt"]}
        labels = data["labels"]
    with _figure(path, ncols=3, figsize=(13, 4.2), dpi=110) as (fig, axes):
        for ax, (name, xy) in zip(axes, views.items()):
            for number, lang in enumerate(languages):
                mask = labels == number
                ax.scatter(xy[mask, 0], xy[mask, 1], s=4, alpha=0.5, label=lang)
            ax.set_title(name)
            ax.set_xticks([])
            ax.set_yticks([])
        axes[0].legend(markerscale=4)
        fig.suptitle(f"{title}: sentence vectors by language, first two components")
