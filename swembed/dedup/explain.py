"""``swembed dedup-explain``: look at a finished run before trusting its cut. From the run's ``state/`` alone (no
encoding, no search) it gives the least similar pairs the run removed (the removed record, the record that keeps it
or the reference it matched, their texts and cosine), a threshold sweep (how many records each threshold from the
run's ``pairs_floor`` to 1 would remove: the re-cut of ``state.Run.cut`` at each) and a histogram of each distinct
text's nearest-neighbour cosine among the stored pairs (for an ``--against`` run: to its nearest reference)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from swembed.dedup.state import Run, write_tsv
from swembed.runtime.folder import atomic_directory

MAX_SWEEP_POINTS = 41


def sweep_thresholds(floor: float) -> np.ndarray:
    """Thresholds from ``floor`` (rounded up to 0.01) to 1 in steps of 0.01, or wider for at most 41 points."""
    start = np.ceil(round(floor * 100, 6)) / 100
    step = max(0.01, np.ceil((1.0 - start) / (MAX_SWEEP_POINTS - 1) * 100) / 100)
    return np.round(np.arange(start, 1.0 + 1e-9, step), 2)


def nearest_similarities(run: Run) -> np.ndarray:
    """Each distinct text's highest cosine among the stored pairs (or to its nearest reference); texts with no
    pair at or above the floor are left out."""
    match = run.match()
    if match is not None:
        return match["reference_similarity"][match["best_reference"] >= 0]
    a, b, sims = run.pairs()
    best = np.full(len(run.arrays["first_record"]), -np.inf, np.float32)
    np.maximum.at(best, a, sims)
    np.maximum.at(best, b, sims)
    return best[np.isfinite(best)]


def histogram_png(similarities: np.ndarray, floor: float, threshold: float, path: Path) -> None:
    from swembed._extras import require

    require("eval", "matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4))
    axes.hist(similarities, bins=np.linspace(floor, 1.0, 51))  # type: ignore[arg-type]  # stubs: bins takes arrays
    axes.axvline(threshold, color="k", linestyle="--", label=f"threshold {threshold:.3f}")
    axes.set_xlabel(f"nearest-neighbour cosine (texts with one >= {floor:.2f})")
    axes.set_ylabel("distinct texts")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def explain(run_folder: str | Path, out: str | Path, pairs: int = 20, overwrite: bool = False) -> str:
    """Write ``least-similar.tsv``, ``sweep.tsv`` and ``similarities.png`` to the new folder ``out``; returns the
    same as text (the pairs, then the sweep)."""
    if isinstance(pairs, bool) or not isinstance(pairs, int) or pairs < 1:
        raise ValueError(f"--pairs must be at least 1, got {pairs!r}")
    run = Run(run_folder)
    run.check_inputs_unchanged()
    arrays, floor = run.arrays, run.config.floor()
    removed = np.flatnonzero(arrays["reason"] >= 2)
    weakest = removed[np.argsort(arrays["similarity"][removed], kind="stable")[:pairs]]
    texts = run.texts([*weakest.tolist(), *arrays["rep_record"][weakest].tolist()])
    least = []
    for rank, record in enumerate(weakest.tolist(), 1):
        keeper = int(arrays["rep_record"][record])
        least.append([rank, f"{arrays['similarity'][record]:.4f}", record, *run.address(record), texts[record],
                      keeper, *run.address(keeper), texts[keeper]])
    n_records = len(arrays["reason"])
    sweep = []
    for threshold in sweep_thresholds(floor).tolist():
        reason = run.cut(threshold)["reason"]
        sweep.append([f"{threshold:.2f}", int((reason == 0).sum()), int((reason != 0).sum()),
                      f"{(reason != 0).mean() if n_records else 0:.4f}"])
    with atomic_directory(Path(out), overwrite, "dedup-explain", [str(run.folder), *map(str, run.inputs)]) as tmp:
        write_tsv(tmp / "least-similar.tsv", ["rank", "similarity", "record", "file", "position", "text",
                                              "keeper", "keeper_file", "keeper_position", "keeper_text"], least)
        write_tsv(tmp / "sweep.tsv", ["threshold", "kept", "removed", "removed_share"], sweep)
        histogram_png(nearest_similarities(run), floor, float(run.summary["threshold"]), tmp / "similarities.png")
    lines = [f"{len(least)} least similar removed pairs of {run.folder} (cosine, removed record, its keeper):"]
    lines += [f"  {row[1]}  [{row[2]}] {row[5][:60]!r}  ->  [{row[6]}] {row[9][:60]!r}" for row in least]
    lines += ["threshold  kept  removed"] + [f"  {t}  {k:,}  {r:,}" for t, k, r, _ in sweep]
    return "\n".join(lines)
