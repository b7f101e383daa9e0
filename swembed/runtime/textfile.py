"""`swembed encode`: a text file (one text per line; .gz, .bz2, .xz read decompressed), or the text column of
.jsonl/.csv/.parquet records (``swembed.runtime.records``), to an .npy matrix, with a rule for lines that are not
UTF-8; a file that is not text is refused."""
from __future__ import annotations

import bz2
import gzip
import lzma
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from swembed.runtime.records import is_record_file, read_records
from swembed.runtime.sniff import SNIFF_BYTES, check_text

__all__ = ["COMPRESSED", "SNIFF_BYTES", "check_text", "encode_file", "read_bytes", "read_passages", "read_texts"]

ERRORS = ("replace", "skip", "strict")
# by suffix, as corpora are read
COMPRESSED: dict[str, Callable[..., IO]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def read_bytes(path: str) -> bytes:
    """The bytes of ``path`` ('-': stdin), decompressed by its suffix, checked to be text (``check_text``)."""
    if path == "-":
        raw = sys.stdin.buffer.read()
    else:
        opener = COMPRESSED.get(Path(path).suffix.lower())
        try:
            with (opener or open)(path, "rb") as handle:
                raw = handle.read()
        except (EOFError, lzma.LZMAError, gzip.BadGzipFile, OSError) as exc:
            if opener is None or isinstance(exc, FileNotFoundError):
                raise
            raise ValueError(f"{path}: not a readable {Path(path).suffix} file ({exc})") from None
    check_text("<stdin>" if path == "-" else path, raw[:SNIFF_BYTES])
    return raw


def read_texts(path: str, errors: str = "replace") -> tuple[list[str], list[int]]:
    """The lines of ``path`` ('-': stdin; see ``read_bytes``) and the 1-based numbers of the lines that are not
    valid UTF-8: decoded with U+FFFD (``replace``), left out (``skip``), or an error naming the first
    (``strict``)."""
    if errors not in ERRORS:
        raise ValueError(f"--errors must be one of {ERRORS}, got {errors!r}")
    raw = read_bytes(path)
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    texts, bad = [], []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix(b"\r")
        try:
            texts.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad.append(number)
            if errors == "strict":
                raise ValueError(f"{path}:{number}: not valid UTF-8 ({exc.reason} at byte {exc.start}); "
                                 "use --errors replace or skip") from None
            if errors == "replace":
                texts.append(line.decode("utf-8", errors="replace"))
    return texts, bad


def read_passages(path: str, text_column: str | None = None,
                  errors: str = "replace") -> tuple[list[str], list[int], list[int]]:
    """The texts of ``path`` by its kind: the ``text_column`` (default ``text``) of .jsonl/.csv/.parquet records, or
    the lines of any other text file (``read_texts``, ``errors`` for lines that are not UTF-8). Returns (texts,
    their addresses: 1-based lines, parquet's 0-based rows; the lines that are not UTF-8)."""
    if is_record_file(path):
        texts, positions = read_records(path, text_column or "text")
        return texts, positions, []
    if text_column is not None:
        raise ValueError(f"{path}: a text column is read from .jsonl, .csv or .parquet records; this file is read as "
                         "lines of text (leave out --text-column)")
    texts, bad = read_texts(path, errors)
    skipped = set(bad) if errors == "skip" else set()
    lines = range(1, len(texts) + len(skipped) + 1)
    return texts, [n for n in lines if n not in skipped], bad


def encode_file(model_path: str, input_path: str, output: str, errors: str = "replace",
                overwrite: bool = False, text_column: str | None = None) -> str:
    """Encode every text of ``input_path`` (``read_passages``) into ``output`` (.npy, float32, written atomically);
    returns a summary."""
    from swembed.runtime.embedder import load
    from swembed.runtime.outputs import atomic_file, check_writable

    read = [input_path, model_path]
    check_writable(Path(output), overwrite, read, folder=False)
    model = load(model_path)
    texts, _, bad = read_passages(input_path, text_column, errors)
    vectors = model.encode(texts)
    with atomic_file(Path(output), overwrite, read) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors.astype(np.float32))
    note = f"; {len(bad)} lines not UTF-8 ({'skipped' if errors == 'skip' else 'decoded with U+FFFD'})" if bad else ""
    return f"{len(texts)} texts -> {output} {vectors.shape}{note}"
