"""How closely an st or model2vec export encodes as swembed does: the cosine of the library's vector to swembed's,
text by text, on the built-in probe texts (``swembed.integrations.probe_texts``). ``swembed export`` measures it
with the real library on the folder it writes, records it there (``AGREEMENT_FILE``) and prints it."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from swembed.integrations.probe_texts import PROBE_TEXTS
from swembed.runtime import StaticEmbedder

AGREEMENT_FILE = "swembed-agreement.json"
THRESHOLD = 0.99  # texts below this cosine are counted


@dataclass(frozen=True)
class Agreement:
    """Cosines of one encoder's vectors to swembed's over a set of texts."""

    texts: int
    min: float
    mean: float
    below: int  # texts with cosine below THRESHOLD
    threshold: float = THRESHOLD

    def line(self, what: str) -> str:
        return (f"{what} agrees with swembed on {self.texts} probe texts: min cosine {self.min:.4f}, mean "
                f"{self.mean:.4f}, {self.below} below {self.threshold}")


def cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Row-by-row cosine; two zero vectors (a text with no word either side) agree (1), one zero vector does not
    (0)."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    norms = np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
    both_zero = (np.linalg.norm(ours, axis=1) == 0) & (np.linalg.norm(theirs, axis=1) == 0)
    found = np.divide((ours * theirs).sum(axis=1), norms, out=np.zeros(len(ours)), where=norms > 0)
    return np.where(both_zero, 1.0, found)


def agreement(ours: np.ndarray, theirs: np.ndarray) -> Agreement:
    found = cosines(ours, theirs)
    return Agreement(len(found), float(found.min()), float(found.mean()), int((found < THRESHOLD).sum()))


def probe_agreement(model: StaticEmbedder, encode: Callable[[Sequence[str]], np.ndarray],
                    texts: Sequence[str] = PROBE_TEXTS) -> Agreement:
    """The agreement of ``encode`` (a library's encoder of the exported folder) with ``model`` on ``texts``."""
    texts = list(texts)
    return agreement(model.encode(texts), np.asarray(encode(texts)))


def record_agreement(folder: Path, fmt: str, found: Agreement) -> None:
    """Write ``found`` into the export's folder (``AGREEMENT_FILE``)."""
    record = {"format": fmt, "probe": "swembed.integrations.probe_texts", **asdict(found)}
    (folder / AGREEMENT_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def read_agreement(folder: Path) -> Agreement | None:
    """The agreement an export recorded in ``folder`` (None when it has none)."""
    path = Path(folder) / AGREEMENT_FILE
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    return Agreement(record["texts"], record["min"], record["mean"], record["below"], record["threshold"])
