"""Load anything we evaluate into an ``encode(list[str]) -> ndarray`` function."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

Encoder = Callable[[list[str]], np.ndarray]


def load_encoder(spec: str, device: str = "auto") -> tuple[str, Encoder]:
    """(kind, encode) for a swe model folder, or a teacher (short name, sentence-transformers folder, hub id)."""
    path = Path(spec)
    config_path = path / "config.json"
    if config_path.is_file() and json.loads(config_path.read_text()).get("format") == "swe-static":
        from swe import load

        model = load(path)
        return "swe", model.encode
    from swe.teachers import load_teacher

    teacher = load_teacher(spec, device=device)
    return "teacher", teacher.encode
