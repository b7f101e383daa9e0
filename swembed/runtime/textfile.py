"""`swembed encode`: a text file (one text per line; .gz, .bz2, .xz read decompressed), or the text column of
.jsonl/.csv/.parquet records (``swembed.runtime.records``), to an .npy matrix (a file, or stdout for ``-``). Lines
are decoded by ``swembed.runtime.decoding`` (a byte-order mark's encoding, else UTF-8 or ``--encoding``) with a rule
for lines that do not decode; a file that is not text is refused."""
from __future__ import annotations

import bz2
import gzip
import io
import lzma
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from swembed.runtime.decoding import LineReader, check_encoding, label
from swembed.runtime.records import Reading, is_record_file, read_records
from swembed.runtime.sniff import SNIFF_BYTES, check_text

__all__ = ["COMPRESSED", "SNIFF_BYTES", "check_text", "encode_file", "read_bytes", "read_passages", "read_texts"]

ERRORS = ("replace", "skip", "strict")
# by suffix, as corpora are read
COMPRESSED: dict[str, Callable[..., IO]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def read_bytes(path: str, encoding: str | None = None) -> bytes:
    """The bytes of ``path`` ('-': stdin), decompressed by its suffix, checked to be text (``check_text``, read in
    ``encoding`` or as its byte-order mark says)."""
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
    check_text("<stdin>" if path == "-" else path, raw[:SNIFF_BYTES], encoding=encoding)
    return raw


def read_texts(path: str, errors: str = "replace", encoding: str | None = None) -> tuple[list[str], list[int]]:
    """The lines of ``path`` ('-': stdin; see ``read_bytes``) and the 1-based numbers of the lines that do not
    decode (``swembed.runtime.decoding``: a byte-order mark's encoding, else ``encoding``, else UTF-8): decoded
    with U+FFFD (``replace``), left out (``skip``), or an error naming the first (``strict``)."""
    if errors not in ERRORS:
        raise ValueError(f"--errors must be one of {ERRORS}, got {errors!r}")
    reading = Reading(encoding, "strict" if errors == "strict" else "replace")
    lines = LineReader(io.BytesIO(read_bytes(path, reading.encoding)), "<stdin>" if path == "-" else path,
                       reading.encoding, reading.errors)
    texts = [text for _, _, text in lines]
    bad = list(lines.decoded.bad_lines or [])
    if errors == "skip":
        skipped = set(bad)
        texts = [text for number, text in enumerate(texts, 1) if number not in skipped]
    return texts, bad


def read_passages(path: str, text_column: str | None = None, errors: str = "replace",
                  encoding: str | None = None) -> tuple[list[str], list[int], list[int]]:
    """The texts of ``path`` by its kind: the ``text_column`` (default ``text``) of .jsonl/.csv/.parquet records, or
    the lines of any other text file (``read_texts``; ``errors`` and ``encoding`` for lines that are not UTF-8, in
    records too). Returns (texts, their addresses: 1-based lines, parquet's 0-based rows; the lines that did not
    decode)."""
    if is_record_file(path):
        reading = Reading(encoding, "strict" if errors == "strict" else "replace")
        texts, positions = read_records(path, text_column or "text", reading)
        bad = sorted(n for decoded in reading.decoded.values() for n in decoded.bad_lines or [])
        if errors == "skip" and bad:
            skipped = set(bad)
            kept = [i for i, p in enumerate(positions) if p not in skipped]
            texts, positions = [texts[i] for i in kept], [positions[i] for i in kept]
        return texts, positions, bad
    if text_column is not None:
        raise ValueError(f"{path}: a text column is read from .jsonl, .csv or .parquet records; this file is read as "
                         "lines of text (leave out --text-column)")
    texts, bad = read_texts(path, errors, encoding)
    skipped = set(bad) if errors == "skip" else set()
    lines = range(1, len(texts) + len(skipped) + 1)
    return texts, [n for n in lines if n not in skipped], bad


def encode_file(model_path: str, input_path: str, output: str, errors: str = "replace",
                overwrite: bool = False, text_column: str | None = None, encoding: str | None = None,
                kind: str | None = None) -> str:
    """Encode every text of ``input_path`` (``read_passages``) into ``output`` (.npy, float32, written atomically;
    ``-``: the .npy bytes to stdout, which must not be a terminal) as ``kind`` texts (``StaticEmbedder.encode``);
    returns a summary."""
    from swembed.runtime.embedder import load
    from swembed.runtime.outputs import atomic_file, check_writable

    read = [input_path, model_path]
    to_stdout = output == "-"
    if to_stdout and sys.stdout.isatty():
        raise ValueError("--output -: writes the .npy file's bytes to stdout, which is a terminal; redirect it "
                         "(> vectors.npy, | python ...) or give a file name")
    if not to_stdout:
        check_writable(Path(output), overwrite, read, folder=False)
    model = load(model_path)
    texts, _, bad = read_passages(input_path, text_column, errors, encoding)
    vectors = model.encode(texts, kind=kind).astype(np.float32)
    if to_stdout:
        np.save(sys.stdout.buffer, vectors)
        sys.stdout.buffer.flush()
    else:
        with atomic_file(Path(output), overwrite, read) as tmp, open(tmp, "wb") as handle:
            np.save(handle, vectors)
    named = label(check_encoding(encoding) or "utf-8")
    note = (f"; {len(bad)} lines not {named} "
            f"({'skipped' if errors == 'skip' else 'decoded with U+FFFD'})" if bad else "")
    return f"{len(texts)} texts -> {'<stdout>' if to_stdout else output} {vectors.shape}{note}"
