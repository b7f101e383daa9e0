"""The one interface every teacher offers to the pipeline."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class TeacherError(ValueError):
    """A teacher cannot be found, loaded or used as asked."""


@dataclass
class TeacherOutput:
    """One batch through the teacher.

    ``hidden``: (B, T, H) last-layer token vectors (torch tensor, float32, on CPU or the device).
    ``offsets``: per text, an int array (T_i, 2) of character spans in the *original* text; special
    and prompt tokens carry (-1, -1) so they never match a word.
    ``pooled``: (B, H) the teacher's own L2-normalised sentence embedding (float32 numpy).
    """

    hidden: object
    offsets: list[np.ndarray]
    pooled: np.ndarray
