"""Cache, manifest and resume machinery shared by every stage.

A stage's artifact lives in ``<work_dir>/<stage>-<key>/`` (key: a hash of the stage's config and its
inputs' keys) with a ``manifest.json`` of its config, stats, wall time and peak memory. Artifacts are
content-addressed, so variants of a stage (another dimension, PCA without ABTT) live side by side and
share their upstream stages; an existing artifact with the same key is reused. Artifacts are written
into a temporary folder and renamed into place, so a crash never leaves a half-written artifact. Long
stages checkpoint into ``<stage>-<key>.partial/`` and resume from the last completed unit of work.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from swembed.runtime.testpoints import reached

if TYPE_CHECKING:
    import numpy as np
    import torch

    from swembed.pipeline.config import DistillConfig

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
CRASH_ENV = "SWEMBED_CRASH_AFTER_UNITS"  # "stage:n": hard-exit after n committed units (tests of resume)
Loaded = TypeVar("Loaded")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def stable_hash(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def text_digest(text: str) -> str:
    """sha256 of a text (for large inputs, such as a tokenizer file, that are part of a stage's identity)."""
    return hashlib.sha256(text.encode()).hexdigest()


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """Samples the process's resident memory in a thread; ``peak`` is the max seen (bytes)."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


@dataclass
class StageResult:
    """A finished stage: where its artifact is and what its manifest says."""

    name: str
    key: str
    path: Path
    manifest: dict = field(default_factory=dict)
    cached: bool = False

    @property
    def stats(self) -> dict:
        return self.manifest.get("stats", {})


def input_keys(inputs: list[StageResult]) -> dict[str, str]:
    """Each input stage's key by its name; a name that repeats (one extract per language, several co-teachers)
    is numbered from its second time: ``coteacher``, ``coteacher #2``."""
    out: dict[str, str] = {}
    for stage in inputs:
        label, n = stage.name, 1
        while label in out:
            n += 1
            label = f"{stage.name} #{n}"
        out[label] = stage.key
    return out


@dataclass
class StageRun:
    """What a stage's compute function gets: where to write, where to checkpoint, how to report progress."""

    name: str
    out: Path
    partial: Path
    quiet: bool = False

    def unit_done(self, units: int) -> None:
        """Call after each checkpointed unit of work: a test point (``swembed.runtime.testpoints``), and the crash hook
        used by resume tests."""
        reached(f"stage {self.name}: unit {units}")
        spec = os.environ.get(CRASH_ENV, "")
        if spec:
            stage, _, count = spec.partition(":")
            if stage == self.name and units >= int(count):
                logger.warning("%s: simulated crash after %d units (%s)", self.name, units, CRASH_ENV)
                os._exit(75)


def stage_dir(work_dir: Path, name: str, key: str) -> Path:
    return Path(work_dir) / f"{name}-{key[:16]}"


def load_checkpoint(path: Path, read: Callable[[Path], Loaded], stage: str) -> Loaded | None:
    """``read(path)`` of a checkpoint file, or None when it cannot be read (truncated, corrupt, or not what this
    version writes): then it is removed, with one log line, and its work is done again instead of failing on
    every rerun. ``read`` must check what it loads before anything uses it."""
    try:
        return read(path)
    except Exception as exc:  # noqa: BLE001 - whatever a reader raises on damaged bytes
        logger.warning("%s: %s is unreadable (%s: %s); recomputing it", stage, path, type(exc).__name__,
                       str(exc).replace("\n", " ")[:200])
        path.unlink(missing_ok=True)
        return None


def _artifact_files(folder: Path) -> dict[str, int]:
    """Every file of a stage's artifact (but its manifest) with its size in bytes, by relative name."""
    return {path.relative_to(folder).as_posix(): path.stat().st_size for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != MANIFEST}


def _damage(final: Path) -> tuple[dict | None, str | None]:
    """(the manifest of the finished artifact at ``final``, what is wrong with it or None). A manifest that does
    not parse, or a file it lists that is missing or of another size (truncated), is damage; manifests written
    before sizes were recorded list none."""
    try:
        manifest = json.loads((final / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"{MANIFEST} is unreadable ({type(exc).__name__})"
    if not isinstance(manifest, dict):
        return None, f"{MANIFEST} is not an object"
    for name, size in (manifest.get("files") or {}).items():
        path = final / name
        found = path.stat().st_size if path.is_file() else None
        if found != size:
            return manifest, f"{name} is {'missing' if found is None else f'{found} bytes, not {size}'}"
    return manifest, None


def cached_stage(name: str, work_dir: Path, config: dict, inputs: list[StageResult]) -> StageResult | None:
    """The finished artifact of this stage, config and inputs, when the work directory holds one (and then a
    checkpoint folder of the same key, left by a killed ``--force`` run, is obsolete and removed). A damaged
    artifact (``_damage``) is not used: one log line, and the stage runs again."""
    key = stable_hash({"stage": name, "config": config, "inputs": [i.key for i in inputs]})
    final = stage_dir(work_dir, name, key)
    if not (final / MANIFEST).is_file():
        return None
    manifest, damage = _damage(final)
    if damage:
        logger.warning("%s: the cached artifact %s is damaged (%s); recomputing it", name, final, damage)
        return None
    shutil.rmtree(final.with_name(final.name + ".partial"), ignore_errors=True)
    return StageResult(name, key, final, cast(dict, manifest), cached=True)  # no damage: a manifest


def run_stage(
    name: str,
    work_dir: Path,
    config: dict,
    inputs: list[StageResult],
    compute: Callable[[StageRun], dict],
    force: bool = False,
    quiet: bool = False,
) -> StageResult:
    """Run ``compute`` unless an artifact with the same key exists; commit atomically; record cost."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    found = None if force else cached_stage(name, work_dir, config, inputs)
    if found is not None:
        logger.info("%s: cached (%s)", name, found.path)
        return found
    key = stable_hash({"stage": name, "config": config, "inputs": [i.key for i in inputs]})
    final = stage_dir(work_dir, name, key)
    partial = final.with_name(final.name + ".partial")
    if force and partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(exist_ok=True)
    for stale in work_dir.glob(f".{name}.tmp-*"):  # left by killed runs; a live run's folder stays
        pid = stale.name.rsplit("-", 1)[1]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = work_dir / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    start = time.time()
    try:
        reached(f"stage {name}: begun")
        with PeakMemory() as memory:
            stats = compute(StageRun(name, tmp, partial, quiet)) or {}
        reached(f"stage {name}: computed")
        manifest = {
            "stage": name,
            "key": key,
            "config": config,
            "inputs": input_keys(inputs),
            "stats": stats,
            "wall_s": round(time.time() - start, 2),
            "peak_rss_mb": round(memory.peak / 2**20, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "files": _artifact_files(tmp),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        from swembed.runtime.outputs import write_error

        named = write_error(final, exc)  # a full disk names the stage's folder
        if named is not None:
            raise named from None
        raise
    shutil.rmtree(partial, ignore_errors=True)
    logger.info("%s: done in %.1fs, peak %.0f MB", name, manifest["wall_s"], manifest["peak_rss_mb"])
    return StageResult(name, key, final, manifest)


def teacher_key(teacher) -> dict:
    """The teacher as a stage's key holds it: its description without the folder it was read from (the same model
    from another cache path is the same teacher)."""
    return {k: v for k, v in teacher.describe().items() if k != "path"}


def what_ran(teacher) -> dict:
    """The dtype and runtime a teacher runs in: ``auto`` picks them by CPU, so an artifact made in bfloat16 on one
    machine is not reused for a float32 build on another."""
    return {"dtype": teacher.dtype_name, "runtime": teacher.runtime}


def teacher_identity(teacher) -> dict:
    """The key parts of a stage the teacher runs in: the teacher and what it ran in."""
    return {"teacher": teacher_key(teacher), "ran": what_ran(teacher)}


@dataclass(frozen=True)
class StageContext:
    """What every stage of one build shares: the work folder its artifacts go to, the device, the seed, whether to
    recompute cached stages (``force``), progress bars off (``quiet``) and the least time between checkpoints.
    Each stage takes it and its own config section."""

    work: Path
    device: str = "auto"
    seed: int = 0
    force: bool = False
    quiet: bool = False
    checkpoint_seconds: float = 60.0

    def run(self, name: str, identity: dict, inputs: list[StageResult],
            compute: Callable[[StageRun], dict]) -> StageResult:
        """``run_stage`` in this build's work folder."""
        return run_stage(name, self.work, identity, inputs, compute, force=self.force, quiet=self.quiet)

    def cached(self, name: str, identity: dict, inputs: list[StageResult]) -> StageResult | None:
        """The finished artifact of this stage, unless ``force``."""
        return None if self.force else cached_stage(name, self.work, identity, inputs)


Prepared = list[tuple[str, "str | None", StageResult]]  # (label in the build report, language or None, stage)


@dataclass(frozen=True)
class PostTraining:
    """A stage around training, registered once (``swembed.pipeline.build.POST_TRAINING``), reading only its own
    config section (``BuildConfig.<section>``, or what ``section_of(config)`` gives). Every hook is optional:

    * ``prepare(ctx, section, sources)``: stages it needs before training (``sources``: a ``PrepareSources``);
      they become inputs of the distill stage;
    * ``identity(section)``: what it adds to the distill stage's identity;
    * ``targets(section, prepared, own)``: a language's KD targets (the teacher's vectors of its encoded
      sentences) changed, e.g. joined with other teachers' vectors; called, in registration order, for each
      language it prepared a stage of (``prepared``: those stages);
    * ``objectives(section, prepared, training)``: the objectives it trains beside the sentence KD
      (``prepared``: the stages its ``prepare`` made; ``training``: a ``TrainingContext``); they follow the
      sentence KD in registration order, and the parallel pairs' contrastive objectives follow them;
    * ``refine(table, section, trained)``: changes the trained table in place (``trained``: a ``Trained``), in
      registration order, inside the distill stage; returns statistics;
    * ``rows(ctx, section, table_stage, compose)``: (its stage, rows, their labels): rows that follow the table's
      rows in the model folder, declared in config.json as ``{section: {"rows": [start, end]}}``;
    * ``plan(section, words)``: lines for the build's plan, saying what its ``prepare`` runs through a teacher
      (``words``: the vocabulary size of all languages).
    """

    section: str
    enabled: Callable[[Any], bool]  # hooks take its own section (Any: each hook's section type)
    prepare: Callable[..., Prepared] | None = None
    identity: Callable[[Any], dict] | None = None
    refine: Callable[..., dict] | None = None
    rows: Callable[..., tuple[StageResult, object, list[str]]] | None = None
    plan: Callable[[Any, int], list[str]] | None = None
    targets: Callable[..., np.ndarray] | None = None
    objectives: Callable[..., list] | None = None  # of swembed.pipeline.train.Objective (torch: not imported here)
    section_of: Callable[[object], object] | None = None  # its settings when BuildConfig has no such section

    def settings(self, config: object) -> object:
        """Its section of the build's ``config``."""
        return self.section_of(config) if self.section_of else getattr(config, self.section)


@dataclass
class PrepareSources:
    """What a ``prepare`` hook may read: the build's teacher, its compose and extract stages, a loader of
    other teachers on the build's device and precision, each language's corpus stage, and the held-out text
    (``BuildConfig.exclude``) no training text may repeat."""

    teacher: object
    compose: StageResult
    extracts: dict[str, StageResult]
    load_teacher: Callable[[str], object]
    corpora: dict[str, StageResult] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)


@dataclass
class Trained:
    """What a ``refine`` hook may read: the composed layout, each language's tokenizer, each word's context count
    and the stages every hook prepared (by section)."""

    layout: Any  # a swembed.pipeline.compose.Layout (not imported: compose imports this module)
    tokenizers: dict
    contexts: np.ndarray
    prepared: dict[str, Prepared]


@dataclass
class TrainingContext:
    """What an ``objectives`` hook may read: the ``[distill]`` section, each language's tokenizer, the training
    device, the build's seed and the seeded generator that every objective draws its split from (in the order the
    objectives are made, so a hook draws only when it makes one), the table training starts from (the pca stage's);
    ``stats``: statistics for the distill stage's manifest, which a hook may add to."""

    config: DistillConfig
    tokenizers: dict
    device: torch.device
    seed: int
    rng: np.random.Generator
    start: np.ndarray
    stats: dict = field(default_factory=dict)
