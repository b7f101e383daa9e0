"""Records with a text column: ``.txt`` (one record per line), ``.jsonl``, ``.csv`` (a header row) and ``.parquet``
(one or more text columns, joined by a newline). Read by ``swembed dedup`` (which takes txt, jsonl and parquet),
``swembed encode --text-column`` and ``swembed search`` / ``swembed index``. Every record gets its address in its
file: the 1-based line it starts on (txt, jsonl, csv) or its 0-based row (parquet).

Text files are read as bytes and decoded by ``swembed.runtime.decoding`` (a byte-order mark's encoding, else UTF-8
or the ``encoding`` given; a line that does not decode is refused naming its file and line, or with ``errors=
"replace"`` decoded with U+FFFD and counted in ``Reading.bad_lines``), and the raw lines (their line endings
included) come with each batch, so that ``swembed dedup`` can keep them byte for byte. A null (a JSON ``null``, a
parquet null) is the empty text; a parquet text column may be dictionary-encoded (a pandas Categorical). A file
that is not text (``sniff.check_text``, as
``swembed encode`` and ``build`` judge it) and a text column that is not there (named with the columns there are)
are refused in one line.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swembed.runtime.decoding import POLICIES, Decoded, LineReader, check_encoding, display_path
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
    values: list[tuple[str, ...]] | None = None  # with several text columns: each record's values (its exact key)


@dataclass
class Reading:
    """How text files are decoded (``encoding``: None reads a byte-order mark, else UTF-8; ``errors``: strict or
    replace), and what reading them found: per file index its decoding (``decoded``: the encoding and the lines
    that did not decode) and, with ``digests``, the SHA-256 of its bytes once read to the end."""

    encoding: str | None = None
    errors: str = "strict"
    digests: bool = False
    decoded: dict[int, Decoded] = field(default_factory=dict)
    sha256: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.errors not in POLICIES:
            raise ValueError(f"--errors must be one of {', '.join(POLICIES)}, got {self.errors!r}")
        self.encoding = check_encoding(self.encoding)

    def bad_lines(self) -> int:
        """How many lines did not decode (decoded with U+FFFD), over every file read."""
        return sum(len(d.bad_lines or []) for d in self.decoded.values())


def is_record_file(path: str | Path) -> bool:
    """Whether ``path`` is a file of records with text columns (.jsonl, .csv, .parquet) by its suffix."""
    return FORMATS.get(Path(path).suffix.lower()) in RECORD_FORMATS


def input_format(path: Path, formats: dict[str, str] = FORMATS) -> str:
    fmt = formats.get(path.suffix.lower())
    if fmt is None:
        raise RecordError(f"{path}: unknown input kind {path.suffix!r}; use {', '.join(formats)}")
    return fmt


def check_inputs(paths: Sequence[str | Path], text_columns: Sequence[str],
                 formats: dict[str, str] = FORMATS, encoding: str | None = None) -> list[Path]:
    """Resolve inputs and fail early, naming the problem: missing files, folders, unknown kinds, files that are not
    text (read in ``encoding`` or as their byte-order mark says), missing columns (of a parquet file's schema, a
    csv file's header)."""
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
            check_text(display_path(path), handle.read(SNIFF_BYTES), RecordError, encoding)
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
        if not is_text_type(schema.field(column).type):
            raise RecordError(f"{path}: column {column!r} holds {schema.field(column).type}, not text")


def is_text_type(kind) -> bool:
    """Whether a pyarrow type holds text: strings, or strings dictionary-encoded (a pandas Categorical)."""
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def joined_text(values: Sequence[str]) -> str:
    """A record's text from its text columns: their values joined by a newline (one column: its value)."""
    return "\n".join(values)


def jsonl_values(line: str, path: Path, number: int, text_columns: Sequence[str]) -> tuple[str, ...]:
    """The text fields of one JSON line (null: empty), in ``text_columns`` order."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{display_path(path)}:{number}: not a JSON object ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, arrays nested past Python's stack
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise RecordError(f"{display_path(path)}:{number}: not a JSON object swembed can read ({why})") from None
    values = []
    for column in text_columns:
        if not isinstance(record, dict) or column not in record:
            fields = f"; its fields are {list(record)}" if isinstance(record, dict) else ""
            raise RecordError(f"{display_path(path)}:{number}: no {column!r} field{fields}")
        text = record[column] if record[column] is not None else ""
        if not isinstance(text, str):
            raise RecordError(f"{display_path(path)}:{number}: {column!r} is {type(text).__name__}, not a string")
        values.append(text.encode("utf-8", errors="replace").decode("utf-8"))  # lone surrogates -> '?'
    return tuple(values)


def jsonl_text(line: str, path: Path, number: int, text_columns: Sequence[str]) -> str:
    """The text of one JSON line: its text fields (null: empty), joined."""
    return joined_text(jsonl_values(line, path, number, text_columns))


def parquet_values(record_batch, text_columns: Sequence[str]) -> list[tuple[str, ...]]:
    """The text columns' values of a pyarrow batch's rows (null: empty)."""
    columns = [[v if v is not None else "" for v in record_batch.column(c).to_pylist()]
               for c in text_columns]
    return list(zip(*columns))


def parquet_texts(record_batch, text_columns: Sequence[str]) -> list[str]:
    """The texts of a pyarrow batch's rows: the text columns (null: empty), joined."""
    return [joined_text(values) for values in parquet_values(record_batch, text_columns)]


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
    import pyarrow as pa
    import pyarrow.parquet as pq

    several = len(text_columns) > 1
    try:
        parquet = pq.ParquetFile(path)
        rows, size, start = parquet.metadata.num_rows, path.stat().st_size, 0
        columns = None if full_rows else list(dict.fromkeys(text_columns))
        for record_batch in parquet.iter_batches(batch_size=batch_size, columns=columns):
            values = parquet_values(record_batch, text_columns)
            texts = [joined_text(v) for v in values]
            yield Batch(index, texts, list(range(start, start + len(texts))), None,
                        size * len(texts) // max(rows, 1), record_batch if full_rows else None,
                        values if several else None)
            start += len(texts)
    except (OSError, pa.ArrowException) as exc:  # a damaged page: pyarrow names neither the file nor the row
        raise RecordError(f"{display_path(path)}: not a readable parquet file ({str(exc).splitlines()[0]}); the "
                          "file is damaged") from None


def file_sha256(path: Path, block: int = 1 << 20) -> str:
    """The SHA-256 of a file's bytes, read a block at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def _line_batches(index: int, path: Path, fmt: str, text_columns: Sequence[str], batch_size: int,
                  reading: Reading) -> Iterator[Batch]:
    """The records of a .txt or .jsonl file, decoded by ``reading``'s rules; with ``reading.digests`` the file's
    SHA-256, hashed from the lines as they are read (no second pass)."""
    several = fmt == "jsonl" and len(text_columns) > 1
    digest = hashlib.sha256() if reading.digests else None
    with open(path, "rb") as handle:
        lines = LineReader(handle, path, reading.encoding, reading.errors)
        reading.decoded[index] = lines.decoded
        texts, positions, raws, values, consumed = [], [], [], [], 0
        for number, line, text in lines:
            consumed += len(line)
            if digest is not None:
                digest.update(line)
            if fmt == "jsonl":
                values.append(jsonl_values(text, path, number, text_columns))
                text = joined_text(values[-1])
            texts.append(text)
            positions.append(number)
            raws.append(line)
            if len(texts) == batch_size:
                yield Batch(index, texts, positions, raws, consumed, None, values if several else None)
                texts, positions, raws, values, consumed = [], [], [], [], 0
        if texts:
            yield Batch(index, texts, positions, raws, consumed, None, values if several else None)
    if digest is not None:
        reading.sha256[index] = digest.hexdigest()


def read_batches(files: list[Path], text_columns: Sequence[str] = ("text",), batch_size: int = 8192,
                 full_rows: bool = False, reading: Reading | None = None) -> Iterator[Batch]:
    """Yield every record of ``files`` in order, ``batch_size`` at a time (never crossing files).
    ``full_rows``: parquet batches carry all columns (for writing kept rows), not just the text. ``reading``: how
    text files are decoded (default: a mark's encoding or UTF-8, strict), and what was found (see ``Reading``)."""
    reading = reading if reading is not None else Reading()
    for index, path in enumerate(files):
        fmt = input_format(path)
        if fmt == "parquet":
            yield from _parquet_batches(index, path, text_columns, batch_size, full_rows)
            if reading.digests:  # pyarrow reads pages where they lie: the bytes are hashed in one sequential read
                reading.sha256[index] = file_sha256(path)
        elif fmt == "csv":
            yield from _csv_batches(index, path, text_columns, batch_size)
        else:
            yield from _line_batches(index, path, fmt, text_columns, batch_size, reading)


def read_records(path: str | Path, text_column: str = "text", reading: Reading | None = None
                 ) -> tuple[list[str], list[int]]:
    """Every record of one file (``check_inputs`` first): its texts and their addresses (1-based lines; parquet:
    0-based rows). ``reading``: how its lines are decoded (``Reading``; default strict)."""
    reading = reading if reading is not None else Reading()
    files = check_inputs([path], [text_column], encoding=reading.encoding)
    texts: list[str] = []
    positions: list[int] = []
    for batch in read_batches(files, [text_column], batch_size=1 << 16, reading=reading):
        texts.extend(batch.texts)
        positions.extend(batch.positions)
    return texts, positions
