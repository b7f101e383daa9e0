"""What a finished ``swembed dedup`` run keeps in ``out/state/`` and the re-cut that reads it.

``state/vectors.f32`` holds the distinct texts' float32 vectors; ``state/arrays.npz`` each record's distinct text,
each distinct text's first and longest record, the pairs searched down to the run's ``pairs_floor`` (or, for an
``--against`` run, each distinct text's nearest reference) and the run's result. ``rethreshold`` re-cuts a run at
another threshold >= that floor from these alone (no encoding, no search): the pairs at or above a threshold are
the same whichever floor the search had, so the mapping equals a fresh run's at that threshold. Only pass 3
(kept records and mapping) reads the inputs again; inputs changed since the run are refused.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import zipfile
from dataclasses import fields, replace
from pathlib import Path
from typing import cast

import numpy as np

from swembed.dedup.job import (
    ARRAYS_FILE,
    VECTORS_FILE,
    DedupConfig,
    FirstPass,
    cut_against,
    file_stats,
    group,
    per_record,
    run_summary,
    save_state,
    write_outputs,
)
from swembed.dedup.records import RecordError, input_format, read_batches
from swembed.runtime.folder import atomic_directory
from swembed.runtime.records import file_sha256


class RunError(RecordError):
    """A run folder that cannot be re-cut, explained or selected from: not a dedup run, or its inputs changed."""


class Run:
    """A finished run, read back: its summary, config, state arrays and (memory-mapped) vectors."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        summary_path, arrays_path = self.folder / "summary.json", self.folder / "state" / ARRAYS_FILE
        if not summary_path.is_file() or not arrays_path.is_file() or not (self.folder / "state" / VECTORS_FILE
                                                                           ).is_file():
            raise RunError(f"{self.folder}: not a swembed dedup run folder (no summary.json and state/); "
                           "runs made before state/ existed need a fresh run")
        try:
            self.summary = json.loads(summary_path.read_text(encoding="utf-8"))
            with np.load(arrays_path) as data:
                self.arrays = {name: data[name] for name in data.files}
            known = {f.name for f in fields(DedupConfig)}
            self.config = DedupConfig(**{k: v for k, v in self.summary["config"].items() if k in known})
            self.config.text_columns = tuple(self.config.text_columns)
            self.inputs = [Path(p) for p in self.summary["inputs"]]
            self.references = [Path(p) for p in self.summary.get("against", [])]
            n_unique, dim = len(self.arrays["first_record"]), int(self.summary["dim"])
            n_inputs = sum(int(n) for n in self.summary["records_per_input"])
            n_refs = sum(int(r["records"]) for r in self.summary.get("references", []))
        except (ValueError, KeyError, TypeError, OSError, zipfile.BadZipFile, RecursionError) as exc:
            why = str(exc).splitlines()[0][:200] if str(exc) else ""
            raise RunError(f"{self.folder}: a damaged dedup run folder ({type(exc).__name__}: {why})") from None
        self._check_arrays(arrays_path, n_unique, n_inputs, n_refs)
        vectors = self.folder / "state" / VECTORS_FILE
        if vectors.stat().st_size != n_unique * dim * 4:
            raise RunError(f"{vectors}: {vectors.stat().st_size} bytes, not {n_unique} x {dim} float32")
        self.vectors = (np.memmap(vectors, dtype=np.float32, mode="r", shape=(n_unique, dim)) if n_unique
                        else np.zeros((0, dim), np.float32))

    def _check_arrays(self, path: Path, n_unique: int, n_inputs: int, n_refs: int) -> None:
        """Refuse ``state/arrays.npz`` arrays of another length or kind, or whose record, text or pair numbers fall
        outside the run (an edited or damaged file would otherwise index past its arrays)."""
        n_all = n_inputs + n_refs
        limits: dict[str, tuple[int | None, int | None]] = {
            "unique_of_record": (n_inputs, n_unique), "first_record": (n_unique, n_inputs),
            "longest_record": (n_unique, n_inputs), "longest_length": (n_unique, None), "rep_record": (n_inputs, n_all),
            "similarity": (n_inputs, None), "reason": (n_inputs, 4)}
        if "pairs_a" in self.arrays:
            pairs = len(self.arrays.get("pairs_similarity", ()))
            limits.update(pairs_a=(pairs, n_unique), pairs_b=(pairs, n_unique), pairs_similarity=(pairs, None))
        if "best_reference" in self.arrays:
            references = len(self.arrays.get("reference_record", ()))
            limits.update(best_reference=(n_unique, references), reference_similarity=(n_unique, None),
                          reference_record=(None, n_all))
        for name, (length, bound) in limits.items():
            why = _array_problem(self.arrays.get(name), length, bound, name == "best_reference")
            if why:
                raise RunError(f"{path}: {name} {why}; the run folder is damaged (run swembed dedup again)")

    def check_inputs_unchanged(self) -> None:
        """Refuse inputs (or references) that are gone or changed (size, modification time) since the run, and
        references whose bytes differ from what the run read (SHA-256; the inputs' are checked as pass 3 reads
        them: ``write_outputs``)."""
        for paths, stats in ((self.inputs, self.summary["input_stats"]),
                             (self.references, self.summary.get("against_stats", []))):
            for path, stat in zip(paths, stats):
                if not path.is_file() or file_stats([path])[0] != list(stat):
                    raise RunError(f"{path}: changed or gone since the run in {self.folder}; run swembed dedup again")
        for path, digest in zip(self.references, self.summary.get("against_sha256", [])):
            if digest is not None and file_sha256(path) != digest:
                raise RunError(f"{path}: its content changed since the run in {self.folder} (SHA-256 differs, though "
                               "size and time may not); run swembed dedup again")

    def _files(self) -> tuple[list[Path], np.ndarray]:
        """Inputs then references, and the record number each starts at."""
        counts = [*self.summary.get("records_per_input", []),
                  *(r["records"] for r in self.summary.get("references", []))]
        return [*self.inputs, *self.references], np.r_[0, np.cumsum(counts)].astype(np.int64)

    def address(self, record: int) -> tuple[str, int]:
        """(file, position) of a record number: a 1-based line, or a 0-based parquet row, as in the mapping."""
        files, starts = self._files()
        index = int(np.searchsorted(starts, record, side="right")) - 1
        path = files[index]
        return str(path), int(record - starts[index]) + (0 if input_format(path) == "parquet" else 1)

    def texts(self, records) -> dict[int, str]:
        """The texts of the given record numbers (inputs or references), read from the files."""
        files, starts = self._files()
        wanted = np.unique(np.asarray(list(records), dtype=np.int64))
        found: dict[int, str] = {}
        for index, path in enumerate(files):
            mine = wanted[(wanted >= starts[index]) & (wanted < starts[index + 1])] - starts[index]
            if len(mine) == 0:
                continue
            record = 0
            for batch in read_batches([path], self.config.text_columns, self.config.batch_size):
                here = mine[(mine >= record) & (mine < record + len(batch.texts))]
                found.update({int(starts[index] + r): batch.texts[r - record] for r in here.tolist()})
                record += len(batch.texts)
        return found

    def first_pass(self) -> FirstPass:
        a = self.arrays
        return FirstPass(a["unique_of_record"], a["first_record"], a["longest_record"], a["longest_length"],
                         self.vectors, np.zeros(0, np.uint64),
                         extra={"records_per_file": self.summary.get("records_per_input", []),
                                "sha256": self.summary.get("input_sha256", []),
                                "encodings": self.summary.get("input_encodings", []),
                                "undecodable_lines": self.summary.get("undecodable_lines", {})})

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = self.arrays
        return a["pairs_a"], a["pairs_b"], a["pairs_similarity"]

    def match(self) -> dict | None:
        names = ("best_reference", "reference_similarity", "reference_record")
        return {n: self.arrays[n] for n in names} if "best_reference" in self.arrays else None

    def cut(self, threshold: float, config: DedupConfig | None = None) -> dict:
        """The per-record result at ``threshold`` (``per_record``'s; no target), from the stored state alone."""
        config = replace(config or self.config, target_size=None, target_fraction=None)
        first = self.first_pass()
        match = self.match()
        if match is not None:
            result = cut_against(match, threshold, len(first.first_record))
        else:
            result = group(first.vectors, first.longest_length, self.pairs(), len(first.unique_of_record),
                           threshold, config)
        return per_record(first, result, config.keep)


def _array_problem(array: np.ndarray | None, length: int | None, bound: int | None, negatives: bool = False
                   ) -> str | None:
    """What is wrong with a state array (None: nothing): missing, of another length, not numbers, or holding an
    index outside [0, ``bound``) (``negatives``: -1 allowed, no reference found; ``bound`` None: any finite)."""
    if array is None:
        return "is missing"
    if array.ndim != 1 or (length is not None and len(array) != length):
        return f"has shape {array.shape}, not ({length},)"
    if array.dtype.kind not in "iuf" or (bound is not None and array.dtype.kind == "f"):
        return f"holds {array.dtype}, not {'indices' if bound is not None else 'numbers'}"
    if bound is None:
        return None if np.isfinite(array).all() else "holds values that are not finite"
    if len(array) and (array.min() < (-1 if negatives else 0) or array.max() >= bound):
        return f"holds an index outside 0..{bound - 1}"
    return None


def rethreshold(run_folder: str | Path, threshold: float, out: str | Path, overwrite: bool = False,
                progress: bool = True) -> dict:
    """Re-cut a finished run at ``threshold`` (at least its ``pairs_floor``) into a new run folder ``out``: the same
    mapping and kept records as a fresh ``swembed dedup`` at that threshold; returns the summary."""
    run = Run(run_folder)
    config = DedupConfig(**{**vars(run.config), "threshold": threshold, "target_size": None,
                            "target_fraction": None, "pairs_floor": run.config.floor(), "progress": progress})
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"--threshold must be between -1 and 1, got {threshold!r}")
    if threshold < cast(float, config.pairs_floor):  # set from run.config.floor() above
        raise RunError(f"{run.folder} stored the pairs down to cosine {config.pairs_floor:.4f}; a cut at {threshold:g} "
                       "needs a fresh run (swembed dedup --pairs-floor)")
    config.validate()
    run.check_inputs_unchanged()
    read = [*map(str, run.inputs), *map(str, run.references), str(run.folder)]
    with atomic_directory(Path(out), overwrite, "dedup", read) as tmp:
        start = time.perf_counter()
        result = run.cut(threshold, config)
        cut_seconds = time.perf_counter() - start
        write_seconds = write_outputs(run.inputs, config, result, tmp, run.summary.get("input_sha256"))
        first = run.first_pass()
        summary = run_summary(run.inputs, run.references, run.summary["model"], int(run.summary["dim"]), config,
                              first, result, {"recut": round(cut_seconds, 2), "pass3_write": round(write_seconds, 2)})
        for name in ("references", "against_sha256"):
            if name in run.summary:
                summary[name] = run.summary[name]
        summary["recut_from"] = str(run.folder)
        (tmp / "state").mkdir()
        _link_or_copy(run.folder / "state" / VECTORS_FILE, tmp / "state" / VECTORS_FILE)
        save_state(tmp / "state", first, result, None if run.match() is not None else run.pairs(), run.match())
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link (no copy of a large file; neither is ever written again), or a copy across file systems."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def tsv_cell(value: object) -> str:
    """A value as one TSV cell: backslash, tab and line breaks escaped (\\\\, \\t, \\n, \\r)."""
    return (str(value).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r"))


def write_tsv(path: Path, header: list[str], rows: list[list]) -> None:
    path.write_text("".join("\t".join(tsv_cell(v) for v in row) + "\n" for row in [header, *rows]), encoding="utf-8")
