"""Near-duplicate mining: ``swembed dedup`` on one machine (``job``), the shared core (``clusters``) and
streaming record I/O (``records``). Needs the ``dedup`` extra (faiss-cpu, scipy, tqdm)."""
from swembed.dedup.job import DedupConfig, dedup

__all__ = ["DedupConfig", "dedup"]
