"""Records with a text column: ``.txt`` (one record per line), ``.jsonl``, ``.csv`` (a header row) and ``.parquet``
(one or more text columns, joined by a newline). Read by ``swembed dedup`` (which takes txt, jsonl and parquet),
``swembed encode --text-column`` and ``swembed search`` / ``swembed index``. Every record gets its address in its
file: the 1-based line it starts on (txt, jsonl, csv) or its 0-based row (parquet).

Text files are read as bytes: a line that is not valid UTF-8 is decoded with replacement characters, and the raw
lines (their line endings included) come with each batch, so that ``swembed dedup`` can keep them byte for byte. A
null (a JSON ``null``, a parquet null) is the empty text. A file that is not text (``sniff.check_text``, as
``swembed encode`` and ``build`` judge it) and a text column that is not there (named with the columns there are)
are refused in one line.
"""
from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from swembed.runtime.sniff import SNIFF_BYTES, check_text

FORMATS = {".txt": "txt", ".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
RECORD_FORMATS = ("jsonl", "csv", "parquet")  # formats with text columns


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


def is_record_file(path: str | Path) -> bool:
    """Whether ``path`` is a file of records with text columns (.jsonl, .csv, .parquet) by its suffix."""
    return FORMATS.get(Path(path).suffix.lower()) in RECORD_FORMATS


def input_format(path: Path, formats: dict[str, str] = FORMATS) -> str:
    fmt = formats.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(f"{path}: unknown input kind {path.suffix!r}; use {', '.join(formats)}")
    return fmt


def check_inputs(paths: Sequence[str | Path], text_columns: Sequence[str],
                 formats: dict[str, str] = FORMATS) -> list[Path]:
    """Resolve inputs and fail early, naming the problem: missing files, folders, unknown kinds, files that are not
    text, missing columns (of a parquet file's schema, a csv file's header)."""
    files = [Path(p) for p in paths]
    if not files:
        raise RecordError("no input files")
    for path in files:
        if path.is_dir():
            raise RecordError(f"{path}: a folder, not a file; give the files in it")
        if not path.is_file():
            raise FileNotFoundError(f"input not found: {path}")
        fmt = input_format(path, formats)
        if fmt == "parquet":
            _check_parquet_columns(path, text_columns)
            continue
        with open(path, "rb") as handle:
            check_text(path, handle.read(SNIFF_BYTES), RecordError)
        if fmt == "csv":
            _csv_columns(path, text_columns)
    return files


def _check_parquet_columns(path: Path, text_columns: Sequence[str]) -> None:
    from swembed._extras import require

    require("data", "pyarrow")
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise RecordError(f"{path}: not a readable parquet file ({exc})") from None
    for column in text_columns:
        if column not in schema.names:
            raise RecordError(f"{path}: no column {column!r}; columns are {schema.names}")
        kind = schema.field(column).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            raise RecordError(f"{path}: column {column!r} holds {kind}, not text")


def decode_line(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def strip_newline(line: bytes) -> bytes:
    """A line without its ``\n`` or ``\r\n``."""
    return line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line


def joined_text(values: Sequence[str]) -> str:
    """A record's text from its text columns: their values joined by a newline (one column: its value)."""
    return "\n".join(values)


def jsonl_text(raw: bytes, path: Path, number: int, text_columns: Sequence[str]) -> str:
    """The text of one JSON line: its text fields (null: empty), joined."""
    try:
        record = json.loads(raw.decode("utf-8", errors="surrogateescape"))
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
    values = []
    for column in text_columns:
        if not isinstance(record, dict) or column not in record:
            fields = f"; its fields are {list(record)}" if isinstance(record, dict) else ""
            raise RecordError(f"{path}:{number}: no {column!r} field{fields}")
        text = record[column] if record[column] is not None else ""
        if not isinstance(text, str):
            raise RecordError(f"{path}:{number}: {column!r} is {type(text).__name__}, not a string")
        values.append(text.encode("utf-8", errors="replace").decode("utf-8"))  # lone surrogates -> '?'
    return joined_text(values)


def parquet_texts(record_batch, text_columns: Sequence[str]) -> list[str]:
    """The texts of a pyarrow batch's rows: the text columns (null: empty), joined."""
    columns = [[v if v is not None else "" for v in record_batch.column(c).to_pylist()]
               for c in text_columns]
    return [joined_text(values) for values in zip(*columns)]


_CSV_FIELD_LIMIT = (1 << 31) - 1  # csv's default (131,072 characters) would refuse a long passage


def _csv_reader(handle: io.TextIOBase):
    csv.field_size_limit(max(csv.field_size_limit(), _CSV_FIELD_LIMIT))
    return csv.reader(handle, strict=True)


def _csv_columns(path: Path, text_columns: Sequence[str]) -> list[int]:
    """The positions of ``text_columns`` in a csv file's header (its first row)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        try:
            header: list[str] = next(_csv_reader(handle), [])
        except csv.Error as exc:
            raise RecordError(f"{path}:1: not a readable csv header ({exc})") from None
    missing = [column for column in text_columns if column not in header]
    if missing:
        raise RecordError(f"{path}: no column {missing[0]!r}; columns are {header}")
    return [header.index(column) for column in text_columns]


def _csv_batches(index: int, path: Path, text_columns: Sequence[str], batch_size: int) -> Iterator[Batch]:
    """The records of a csv file (its first row names the columns; a field left out at a row's end is empty)."""
    positions_of = _csv_columns(path, text_columns)
    size = path.stat().st_size
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        reader = _csv_reader(handle)
        texts: list[str] = []
        starts: list[int] = []
        try:
            next(reader)
            line = reader.line_num + 1
            for row in reader:
                texts.append(joined_text([row[i] if i < len(row) else "" for i in positions_of]))
                starts.append(line)
                line = reader.line_num + 1
                if len(texts) == batch_size:
                    yield Batch(index, texts, starts, None, 0)
                    texts, starts = [], []
        except csv.Error as exc:
            raise RecordError(f"{path}:{line}: not a readable csv record ({exc})") from None
        if texts:
            yield Batch(index, texts, starts, None, size)


def _parquet_batches(index: int, path: Path, text_columns: Sequence[str], batch_size: int,
                     full_rows: bool) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    rows, size, start = parquet.metadata.num_rows, path.stat().st_size, 0
    columns = None if full_rows else list(dict.fromkeys(text_columns))
    for record_batch in parquet.iter_batches(batch_size=batch_size, columns=columns):
        texts = parquet_texts(record_batch, text_columns)
        yield Batch(index, texts, list(range(start, start + len(texts))), None,
                    size * len(texts) // max(rows, 1), record_batch if full_rows else None)
        start += len(texts)


def _line_batches(index: int, path: Path, fmt: str, text_columns: Sequence[str], batch_size: int) -> Iterator[Batch]:
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


def read_batches(files: list[Path], text_columns: Sequence[str] = ("text",), batch_size: int = 8192,
                 full_rows: bool = False) -> Iterator[Batch]:
    """Yield every record of ``files`` in order, ``batch_size`` at a time (never crossing files).
    ``full_rows``: parquet batches carry all columns (for writing kept rows), not just the text."""
    for index, path in enumerate(files):
        fmt = input_format(path)
        if fmt == "parquet":
            yield from _parquet_batches(index, path, text_columns, batch_size, full_rows)
        elif fmt == "csv":
            yield from _csv_batches(index, path, text_columns, batch_size)
        else:
            yield from _line_batches(index, path, fmt, text_columns, batch_size)


def read_records(path: str | Path, text_column: str = "text") -> tuple[list[str], list[int]]:
    """Every record of one file (``check_inputs`` first): its texts and their addresses (1-based lines; parquet:
    0-based rows)."""
    files = check_inputs([path], [text_column])
    texts: list[str] = []
    positions: list[int] = []
    for batch in read_batches(files, [text_column], batch_size=1 << 16):
        texts.extend(batch.texts)
        positions.extend(batch.positions)
    return texts, positions
