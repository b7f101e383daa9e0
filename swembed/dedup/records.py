"""Streaming record readers and writers for ``swembed dedup``: ``.txt`` (one record per line), ``.jsonl`` and
``.parquet`` (one or more text columns, joined by a newline). Every record gets a global index in input order
and an address (file, line or row) so the mapping can account for each one.

Text files are read as bytes: a line that is not valid UTF-8 is decoded with replacement characters
for hashing and encoding, while the kept output gets its original bytes back, line ending (``\n`` or ``\r\n``)
included. A file that is not text (``runtime.textfile.check_text``, as ``swembed encode`` and ``build`` judge it)
and a file name with a tab or line break (it would break ``mapping.tsv``'s lines) are refused.
"""
from __future__ import annotations

import json
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from swembed.runtime.textfile import SNIFF_BYTES, check_text

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".parquet": "parquet"}


class RecordError(ValueError):
    """An input file is missing, of an unknown kind, or a record lacks its text."""


@dataclass
class Batch:
    """Consecutive records of one file: their texts, raw lines with their line endings (txt/jsonl) and 1-based
    line or 0-based row numbers."""

    file: int
    texts: list[str]
    positions: list[int]
    raw: list[bytes] | None
    progress_bytes: int
    rows: object = None  # parquet with full_rows: the pyarrow RecordBatch of all columns


def input_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(f"{path}: unknown input kind {path.suffix!r}; use {', '.join(FORMATS)}")
    return fmt


def check_inputs(paths: Sequence[str | Path], text_columns: Sequence[str]) -> list[Path]:
    """Resolve inputs and fail early, naming the problem: missing files, folders, unknown kinds, file names
    ``mapping.tsv`` cannot hold, files that are not text, missing columns."""
    files = [Path(p) for p in paths]
    if not files:
        raise RecordError("no input files")
    for path in files:
        if any(ch in str(path) for ch in "\t\n\r"):
            raise RecordError(f"{str(path)!r}: a tab or line break in a file name would break mapping.tsv's lines; "
                              "rename the file")
        if path.is_dir():
            raise RecordError(f"{path}: a folder, not a file; give the files in it")
        if not path.is_file():
            raise FileNotFoundError(f"input not found: {path}")
        if input_format(path) == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            schema = pq.read_schema(path)
            for column in text_columns:
                if column not in schema.names:
                    raise RecordError(f"{path}: no column {column!r}; columns are {schema.names}")
                kind = schema.field(column).type
                if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                    raise RecordError(f"{path}: column {column!r} holds {kind}, not text")
        else:
            with open(path, "rb") as handle:
                check_text(path, handle.read(SNIFF_BYTES), RecordError)
    return files


def decode_line(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def strip_newline(line: bytes) -> bytes:
    """A line without its ``\n`` or ``\r\n``."""
    return line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line


def joined_text(values: Sequence[str]) -> str:
    """A record's text from its text columns: their values joined by a newline (one column: its value)."""
    return "\n".join(values)


def jsonl_text(raw: bytes, path: Path, number: int, text_columns: Sequence[str]) -> str:
    try:
        record = json.loads(raw.decode("utf-8", errors="surrogateescape"))
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
    values = []
    for column in text_columns:
        if not isinstance(record, dict) or column not in record:
            raise RecordError(f"{path}:{number}: no {column!r} field")
        text = record[column]
        if not isinstance(text, str):
            raise RecordError(f"{path}:{number}: {column!r} is {type(text).__name__}, not a string")
        values.append(text.encode("utf-8", errors="replace").decode("utf-8"))  # lone surrogates -> '?'
    return joined_text(values)


def parquet_texts(record_batch, text_columns: Sequence[str]) -> list[str]:
    """The texts of a pyarrow batch's rows: the text columns (null: empty), joined."""
    columns = [[v if v is not None else "" for v in record_batch.column(c).to_pylist()]
               for c in text_columns]
    return [joined_text(values) for values in zip(*columns)]


def read_batches(files: list[Path], text_columns: Sequence[str] = ("text",), batch_size: int = 8192,
                 full_rows: bool = False) -> Iterator[Batch]:
    """Yield every record of ``files`` in order, ``batch_size`` at a time (never crossing files).
    ``full_rows``: parquet batches carry all columns (for writing kept rows), not just the text."""
    for index, path in enumerate(files):
        fmt = input_format(path)
        if fmt == "parquet":
            import pyarrow.parquet as pq

            parquet = pq.ParquetFile(path)
            rows, size, start = parquet.metadata.num_rows, path.stat().st_size, 0
            columns = None if full_rows else list(dict.fromkeys(text_columns))
            for record_batch in parquet.iter_batches(batch_size=batch_size, columns=columns):
                texts = parquet_texts(record_batch, text_columns)
                yield Batch(index, texts, list(range(start, start + len(texts))), None,
                            size * len(texts) // max(rows, 1), record_batch if full_rows else None)
                start += len(texts)
            continue
        with open(path, "rb") as handle:
            texts, positions, raws, consumed, number = [], [], [], 0, 0
            for line in handle:
                number += 1
                consumed += len(line)
                raw = strip_newline(line)
                texts.append(decode_line(raw) if fmt == "txt" else jsonl_text(raw, path, number, text_columns))
                positions.append(number)
                raws.append(line)
                if len(texts) == batch_size:
                    yield Batch(index, texts, positions, raws, consumed)
                    texts, positions, raws, consumed = [], [], [], 0
            if texts:
                yield Batch(index, texts, positions, raws, consumed)


def kept_names(files: list[Path]) -> list[str]:
    """The name each input's kept records get under ``kept/``, one of its own per input: its file name when no
    other input has it, else numbered by its position (``001-a.txt``), with a further number while that is
    another input's name (``000-1-a.txt``). Names are compared as a case-insensitive, normalising file system
    would compare them (NFC, case-folded), so no two inputs write one file anywhere."""
    def same(name: str) -> str:
        return unicodedata.normalize("NFC", name).casefold()

    names = [path.name for path in files]
    counts = Counter(map(same, names))
    taken = {same(name) for name in names if counts[same(name)] == 1}
    kept = []
    for index, name in enumerate(names):
        candidate, extra = name, 0
        if counts[same(name)] > 1:
            candidate = f"{index:03d}-{name}"
            while same(candidate) in taken:
                extra += 1
                candidate = f"{index:03d}-{extra}-{name}"
            taken.add(same(candidate))
        kept.append(candidate)
    return kept


class KeptWriter:
    """Writes the kept records of each input to ``out/kept/<input name>`` in the input's own format."""

    def __init__(self, files: list[Path], out: Path) -> None:
        self.files = files
        self.folder = out / "kept"
        self.folder.mkdir(parents=True, exist_ok=True)
        self._handles: dict[int, object] = {}
        self._parquet: dict[int, object] = {}
        self.names = kept_names(files)

    def _name(self, index: int) -> Path:
        return self.folder / self.names[index]

    def write(self, batch: Batch, keep: list[bool]) -> None:
        if batch.raw is not None:
            handle = self._handles.get(batch.file)
            if handle is None:
                handle = self._handles[batch.file] = open(self._name(batch.file), "wb")
            handle.write(b"".join(raw for raw, k in zip(batch.raw, keep) if k))
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        writer = self._parquet.get(batch.file)
        if writer is None:
            writer = self._parquet[batch.file] = pq.ParquetWriter(self._name(batch.file), batch.rows.schema)
        writer.write_batch(batch.rows.filter(pa.array(keep)))

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()
        for writer in self._parquet.values():
            writer.close()
