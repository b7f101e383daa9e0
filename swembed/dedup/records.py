"""``swembed dedup``'s records: the readers of ``swembed.runtime.records`` (``.txt``, ``.jsonl``, ``.parquet``;
not ``.csv``, whose records have no raw lines to keep byte for byte), the names of the kept files and their
writer. A file name with a tab or line break (it would break ``mapping.tsv``'s lines) is refused.
"""
from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from swembed.runtime import records
from swembed.runtime.decoding import display_path
from swembed.runtime.records import (  # noqa: F401 - re-exported: dedup's modules read records through here
    Batch,
    Reading,
    RecordError,
    jsonl_values,
    read_batches,
)

FORMATS = {suffix: fmt for suffix, fmt in records.FORMATS.items() if fmt != "csv"}


def input_format(path: Path) -> str:
    return records.input_format(path, FORMATS)


def check_inputs(paths: Sequence[str | Path], text_columns: Sequence[str], encoding: str | None = None) -> list[Path]:
    """``records.check_inputs`` over dedup's formats, after refusing file names ``mapping.tsv`` cannot hold and a
    file given twice (``a.txt ./a.txt``: its records would be mapped twice under one name)."""
    seen: dict[Path, str] = {}
    for path in paths:
        if any(ch in str(path) for ch in "\t\n\r"):
            raise RecordError(f"{str(path)!r}: a tab or line break in a file name would break mapping.tsv's lines; "
                              "rename the file")
        resolved = Path(path).resolve()
        if resolved in seen:
            raise RecordError(f"{display_path(path)}: given twice (also as {display_path(seen[resolved])}); give each "
                              "input once")
        seen[resolved] = str(path)
    return records.check_inputs(paths, text_columns, FORMATS, encoding)


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
        self._handles: dict[int, IO[bytes]] = {}
        self._parquet: dict[int, Any] = {}  # pyarrow.parquet.ParquetWriter (pyarrow: imported when needed)
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

        rows: Any = batch.rows  # parquet: the pyarrow RecordBatch
        writer = self._parquet.get(batch.file)
        if writer is None:
            writer = self._parquet[batch.file] = pq.ParquetWriter(self._name(batch.file), rows.schema)
        writer.write_batch(rows.filter(pa.array(keep)))

    def close(self) -> None:
        """Close every kept file; an input none of whose records were written (none kept, or none there) gets an
        empty one: no bytes, or a parquet file of no rows with the input's schema."""
        for index, path in enumerate(self.files):
            if index in self._handles or index in self._parquet:
                continue
            if records.input_format(path, FORMATS) != "parquet":
                self._handles[index] = open(self._name(index), "wb")
            else:
                import pyarrow.parquet as pq

                self._parquet[index] = pq.ParquetWriter(self._name(index), pq.read_schema(path))
        for handle in self._handles.values():
            handle.close()
        for writer in self._parquet.values():
            writer.close()
