"""Near-duplicate mining: ``swembed dedup`` on one machine (``job``), the shared core (``clusters``), streaming
record I/O (``records``), a finished run's ``state/`` and re-cut (``state``), ``dedup-explain`` (``explain``) and
``dedup-select`` (``select``). Needs the ``dedup`` extra (faiss-cpu, scipy, tqdm)."""
from swembed.dedup.job import DedupConfig, dedup

__all__ = ["DedupConfig", "dedup"]
