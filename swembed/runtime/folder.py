"""The model folder: plain files any language can read.

```
embeddings.npy   (V, d) float32 or float16 table, row i is the word on line i of vocab.txt
vocab.txt        one word per line (UTF-8)
tokenizer.json   the teacher's sub-word tokenizer, used only for OOV back-off
config.json      format version, teacher, dims, tokenisation rules, build stats
scales.npy       (V,) float32, only for int8 tables: row_float = row_int8 * scale
```
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

FORMAT_NAME = "swe-static"
FORMAT_VERSION = 1
EMBEDDINGS_FILE = "embeddings.npy"
VOCAB_FILE = "vocab.txt"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
SCALES_FILE = "scales.npy"  # int8 tables only: one float32 scale per row


class ModelFolderError(ValueError):
    """A model folder is missing or malformed."""


def read_vocab(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return handle.read().split("\n")[:-1]


def read_config(folder: Path) -> dict:
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise ModelFolderError(f"{folder} is not a swembed model folder: {CONFIG_FILE} is missing")
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.get("format") != FORMAT_NAME:
        raise ModelFolderError(f"{path}: format is {config.get('format')!r}, expected {FORMAT_NAME!r}")
    if int(config.get("format_version", 0)) > FORMAT_VERSION:
        raise ModelFolderError(f"{path}: format_version {config['format_version']} is newer than this swembed reads")
    return config


@contextmanager
def atomic_directory(out: Path) -> Iterator[Path]:
    """Yield a temp folder beside ``out``; on success it replaces ``out``, on error it is removed."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        yield tmp
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_model_folder(
    out: Path,
    table: np.ndarray,
    words: list[str],
    config: dict,
    tokenizer_json: str | None,
    extra_arrays: dict[str, np.ndarray] | None = None,
) -> Path:
    """Write a complete model folder atomically: built in a temp folder beside ``out``, then renamed."""
    if table.ndim != 2 or table.shape[0] != len(words):
        raise ModelFolderError(f"table shape {table.shape} does not match {len(words)} words")
    bad = [w for w in words if not w or "\n" in w]
    if bad:
        raise ModelFolderError(f"vocabulary has {len(bad)} empty or multi-line words, e.g. {bad[:3]!r}")
    with atomic_directory(out) as tmp:
        np.save(tmp / EMBEDDINGS_FILE, table)
        (tmp / VOCAB_FILE).write_text("".join(w + "\n" for w in words), encoding="utf-8")
        if tokenizer_json is not None:
            (tmp / TOKENIZER_FILE).write_text(tokenizer_json, encoding="utf-8")
        for name, array in (extra_arrays or {}).items():
            np.save(tmp / f"{name}.npy", array)
        full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **config}
        full.setdefault("dim", int(table.shape[1]))
        full.setdefault("vocab_size", len(words))
        full.setdefault("dtype", str(table.dtype))
        (tmp / CONFIG_FILE).write_text(json.dumps(full, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Path(out)


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    """np.save to a temp file beside ``path``, then rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}.npy")
    np.save(tmp, array)
    os.replace(tmp, path)


def update_config(folder: Path, patch: dict) -> None:
    """Merge ``patch`` into a model folder's config.json (atomic replace)."""
    config = read_config(Path(folder))
    config.update(patch)
    path = Path(folder) / CONFIG_FILE
    tmp = path.with_name(f".{CONFIG_FILE}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
