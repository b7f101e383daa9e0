"""The model folder: plain files any language can read.

```
embeddings.npy   (V, d) float32 or float16 table, row i is the word on line i of vocab.txt
vocab.txt        one word per line (UTF-8)
tokenizer.json   the teacher's sub-word tokenizer, used only for OOV back-off
config.json      format version, teacher, dims, tokenisation rules, build stats
scales.npy       (V,) float32, only for int8 tables: row_float = row_int8 * scale
codes.npy        (V,) only for codebook tables (int4 and codebook storage: swembed.runtime.storage)
```
"""
from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

import numpy as np

from swembed.runtime.outputs import (
    atomic_directory,
    atomic_file,
    read_marker,
    special_kind,
)
from swembed.runtime.storage import CODES_FILE, STORAGE_KINDS, storage_kind, unpack_int4

if TYPE_CHECKING:
    from collections.abc import Callable

    from tokenizers import Tokenizer

    Fail = Callable[[str, str, object], NoReturn]  # refuses a config.json key: (key, what it must be, its value)

FORMAT_NAME = "swe-static"
FORMAT_VERSION = 1
EMBEDDINGS_FILE = "embeddings.npy"
VOCAB_FILE = "vocab.txt"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"
SCALES_FILE = "scales.npy"  # int8 tables only: one float32 scale per row
TABLE_DTYPES = ("float32", "float16", "int8")
KIND_WEIGHTS = "kind_weights"  # config.json key: {"query": "query_weights.npy", "document": ...}, each file optional
# per-row weights by what they weigh: a query's or a passage's rows in its mean (encode's kinds), and the BM25 weight of
# a query word's term in the lexical channel of search ("lexical": swembed.runtime.lexical)
KIND_WEIGHT_FILES = {"query": "query_weights.npy", "document": "document_weights.npy",
                     "lexical": "lexical_weights.npy"}
KIND_WEIGHT_RANGE = (1e-6, 1e6)  # each row's weight for a kind lies within


class ModelFolderError(ValueError):
    """A model folder is missing or malformed."""


# The most bytes a table folder's JSON file may hold (they are read whole); vocab.txt may hold VOCAB_BYTES_PER_ROW
# a table row on average (its labels are words and pieces), plus VOCAB_BYTES_SLACK.
JSON_BYTES = {"config.json": 16 << 20, "tokenizer.json": 256 << 20}
VOCAB_BYTES_PER_ROW, VOCAB_BYTES_SLACK = 1024, 1 << 20
NPY_MAGIC = b"\x93NUMPY"


def has_file(path: Path, limit: int | None = None) -> bool:
    """Whether the table folder has the file ``path`` (False when nothing is there). A link to a regular file counts
    (a Hub cache's snapshot is links); a FIFO, a device, a socket or a folder is refused (reading a FIFO would wait
    forever), and so is a file of more than ``limit`` bytes."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ModelFolderError(f"{path}: unreadable ({exc.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        what = "a folder" if stat.S_ISDIR(info.st_mode) else special_kind(path, follow_links=True) or "not a file"
        raise ModelFolderError(f"{path}: not a regular file ({what}); a table folder holds plain files")
    if limit is not None and info.st_size > limit:
        raise ModelFolderError(f"{path}: {info.st_size:,} bytes, more than the {limit:,} such a file may hold; "
                               "not a table's file")
    return True


def read_vocab(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as handle:
        return handle.read().split("\n")[:-1]


FOREIGN_FOLDERS = (  # (a file that marks it, what it is and what to do with it), the first that matches
    ("config_sentence_transformers.json", ("a sentence-transformers folder, not a swembed model folder: load it "
                                           "with sentence_transformers.SentenceTransformer('{folder}')")),
    ("model.safetensors", ("a model2vec folder, not a swembed model folder: load it with "
                           "model2vec.StaticModel.from_pretrained('{folder}'), or give it as model2vec:{folder} to "
                           "swembed eval, bench or ensemble")),
    ("modules.json", ("a sentence-transformers folder, not a swembed model folder: load it with "
                      "sentence_transformers.SentenceTransformer('{folder}')")),
)


def read_config(folder: Path) -> dict:
    path = folder / CONFIG_FILE
    present = has_file(path, JSON_BYTES[CONFIG_FILE])
    config = _read_json(path) if present else None
    if not isinstance(config, dict) or "format" not in config:
        for marker, what in FOREIGN_FOLDERS:
            if (folder / marker).is_file():
                raise ModelFolderError(f"{folder} is {what.format(folder=folder)}")
    if not present:
        raise ModelFolderError(f"{folder} is not a swembed model folder: {CONFIG_FILE} is missing")
    if not isinstance(config, dict) or config.get("format") != FORMAT_NAME:
        found = config.get("format") if isinstance(config, dict) else type(config).__name__
        raise ModelFolderError(f"{path}: format is {found!r}, expected {FORMAT_NAME!r}")
    version = config.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ModelFolderError(f"{path}: format_version must be an integer, got {json.dumps(version)}")
    if version > FORMAT_VERSION:
        raise ModelFolderError(f"{path}: format_version {version} is newer than this swembed reads")
    if version < 0:
        raise ModelFolderError(f"{path}: format_version must be 0 to {FORMAT_VERSION}, got {version}")
    _check_types(path, config)
    return config


def _no_constant(name: str) -> None:
    """Python's json reads NaN and Infinity, which JSON does not have (and no other reader accepts)."""
    raise ValueError(f"{name} is not a JSON value")


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ModelFolderError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ModelFolderError(f"{path}: nested too deeply to read (a config.json is a few levels deep)") from None


ROW_BLOCKS = ("pieces", "grams")  # config keys of the blocks of back-off rows after the words: {"rows": [start, end]}


def _row_ranges(config: dict) -> list[tuple[str, Any]]:
    """(name, spec) of every row range config.json declares: the back-off blocks (None when absent), then each
    language's words."""
    return [(name, config.get(name)) for name in ROW_BLOCKS] + [
        (f"language {lang}", spec) for lang, spec in (config.get("languages") or {}).items()]


def _check_types(path: Path, config: dict) -> None:
    """The keys a reader uses have the types it expects, so a hand-edited config.json fails here, naming the
    key, not later with a traceback."""
    from swembed.runtime.tokenizer import TokenizationRules

    def fail(key: str, expected: str, value: object) -> NoReturn:
        raise ModelFolderError(f"{path}: {key} must be {expected}, got {json.dumps(value)}")

    if config.get("tokenizer", TOKENIZER_FILE) not in (TOKENIZER_FILE, None):
        fail("tokenizer", f'"{TOKENIZER_FILE}" or null (no sub-word tokenizer)', config["tokenizer"])
    _check_ensemble(fail, config.get("ensemble"))
    dim = config.get("dim", 1)
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        fail("dim", "an integer >= 1", dim)
    languages = config.get("languages")
    if languages is not None and not isinstance(languages, dict):
        fail("languages", "an object", languages)
    rules = {"": config.get("tokenization", {}), **_language_rules(fail, config)}
    for where, value in rules.items():
        if not isinstance(value, dict):
            fail(f"{where}tokenization", "an object", value)
        try:
            TokenizationRules.from_dict(value)
        except (TypeError, ValueError) as exc:
            raise ModelFolderError(f"{path}: {where}{exc}") from None


def _language_rules(fail: Fail, config: dict) -> dict[str, object]:
    """Each declared row range checked for the shape ``{"rows": [start, end]}``; each language's tokenisation
    rules by the prefix that names it in a message (``"language en: "``)."""
    rules = {}
    for name, spec in _row_ranges(config):
        if spec is None and name in ROW_BLOCKS:
            continue
        rows = spec.get("rows") if isinstance(spec, dict) else None
        if not (isinstance(rows, list) and len(rows) == 2 and
                all(isinstance(r, int) and not isinstance(r, bool) for r in rows)):
            fail(name, 'an object with "rows": [start, end]', spec)
        if name not in ROW_BLOCKS:
            rules[f"{name}: "] = spec.get("tokenization", {})
    return rules


def _check_ensemble(fail: Fail, ensemble: object) -> None:
    """An ensemble's sub-spaces: each a dimension >= 1 and a positive finite weight (the encoder normalises and
    weights each; their dims must add up to the table's, checked in ``read_model_folder``)."""
    if ensemble is None:
        return
    if not isinstance(ensemble, dict):
        fail("ensemble", "an object", ensemble)
    subspaces = ensemble.get("subspaces", [])

    def valid(s: object) -> bool:
        dim, weight = (s.get("dim"), s.get("weight")) if isinstance(s, dict) else (None, None)
        return (isinstance(dim, int) and not isinstance(dim, bool) and dim >= 1 and
                isinstance(weight, (int, float)) and not isinstance(weight, bool) and 0 < weight < math.inf)

    if not isinstance(subspaces, list) or not all(valid(s) for s in subspaces):
        fail("ensemble subspaces", 'a list of {"dim": an integer >= 1, "weight": a number above 0}', subspaces)
    from swembed.runtime.tokenizer import WEIGHTS

    for i, subspace in enumerate(subspaces):
        if not WEIGHTS.holds(subspace["weight"]):
            fail(f"ensemble subspace {i} weight", f"{WEIGHTS} (weights are relative: scale them all)",
                 subspace["weight"])


def _check_row_ranges(path: Path, config: dict, rows: int) -> None:
    """Each declared range of rows inside the table and not empty; the languages' word rows (several languages
    may share one block: the same range) before the back-off blocks; no two different ranges overlapping."""
    spans = {name: tuple(spec["rows"]) for name, spec in _row_ranges(config) if spec is not None}
    for name, (start, end) in spans.items():
        if not 0 <= start <= end <= rows:
            raise ModelFolderError(f"{path}: {name} rows {[start, end]} outside the {rows} table rows")
        if start == end:
            raise ModelFolderError(f"{path}: {name} rows {[start, end]} hold no rows; leave {name} out of "
                                   "config.json for a table without them")
    words_end = min((spans[name][0] for name in ROW_BLOCKS if name in spans), default=rows)
    for name, (start, end) in spans.items():
        if name not in ROW_BLOCKS and end > words_end:
            raise ModelFolderError(f"{path}: {name} rows {[start, end]} run into the back-off rows from {words_end}")
    distinct = sorted({span: name for name, span in spans.items()}.items())
    for (first, name), (second, other) in zip(distinct, distinct[1:]):
        if second[0] < first[1]:
            raise ModelFolderError(f"{path}: {name} rows {list(first)} and {other} rows {list(second)} overlap; "
                                   "each range of rows is one language's words or one back-off block")


def check_words(path: Path, words: list[str], ranges: list[tuple[int, int]],
                lowercased: Sequence[bool] = ()) -> None:
    """The vocabulary file as the tokenizer matches it: no byte-order mark, and within each range of word rows
    (one per language) no empty word, no word with surrounding whitespace, no word twice, and no upper-case
    letter where the range's rules lower-case text (``lowercased``, one flag per range); otherwise a word would
    silently never match, or match another row."""
    if words and words[0].startswith("\ufeff"):
        raise ModelFolderError(f"{path}: starts with a byte-order mark (U+FEFF); save it as UTF-8 without one")
    for (start, end), lowercase in zip(ranges, [*lowercased, *[False] * len(ranges)]):
        span = words[start:end]
        joined = "\n".join(span) if lowercase else ""
        if joined != joined.lower():  # C-level passes; the loop only to name the line
            line, word = next((line, w) for line, w in enumerate(span, start + 1) if w.lower() != w)
            raise ModelFolderError(f"{path}:{line}: {word!r} has upper-case letters, but the table's tokenization "
                                   "lower-cases text, so it would never match")
        unique = set(span)
        if len(unique) != len(span):
            first: dict[str, int] = {}
            for line, word in enumerate(span, start + 1):
                if first.setdefault(word, line) != line:
                    raise ModelFolderError(f"{path}:{line}: {word!r} repeats line {first[word]}; each word must be "
                                           "on one line only")
        if "" in unique or list(map(str.strip, span)) != span:  # C-level passes; the loop only to name the line
            line, word = next((line, w) for line, w in enumerate(span, start + 1) if not w or w.strip() != w)
            raise ModelFolderError(f"{path}:{line}: {word!r} is empty or has surrounding whitespace; words are "
                                   "matched exactly")


TABLE_CHECK = "table_check"  # marker key: the finite-value scan's result, with the size and time of the file scanned
_SCAN_ROWS = 1 << 10  # rows per block of the finite-value scan (the block stays in cache)


def table_stamp(path: Path) -> dict:
    """What ``TABLE_CHECK`` records of ``embeddings.npy``: a changed size or modification time means it was
    written since it was checked, so it is scanned again."""
    stat = Path(path).stat()
    return {"finite": True, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}


MAGNITUDES = (1e-15, 1e15)  # a non-zero row's largest |value| (or a row's scale) lies within: encoding stays exact


class BadRow(NamedTuple):
    row: int
    problem: str  # "holds ..."
    in_scales: bool  # the row's scale is bad (a word's), not its values (a codebook's shared row, no single word's)


def _usable(peaks: np.ndarray) -> np.ndarray:
    """Whether each row's largest |value| (NaN for a row holding one) is zero or within ``MAGNITUDES``."""
    peaks = np.asarray(peaks, dtype=np.float64)  # compared in float16, 1e15 would be inf
    with np.errstate(invalid="ignore"):
        return (peaks == 0) | ((peaks >= MAGNITUDES[0]) & (peaks <= MAGNITUDES[1]))


def _problem(peak: float) -> str:
    if not math.isfinite(peak):
        return "holds NaN or infinite values"
    return (f"holds values of magnitude {peak:.3g}, outside {MAGNITUDES[0]:g} to {MAGNITUDES[1]:g} (its vectors would "
            "underflow or overflow float32)")


def first_bad_row(table: np.ndarray, scales: np.ndarray | None = None) -> BadRow | None:
    """The first row that cannot encode: NaN or an infinity, or a non-zero largest |value| outside ``MAGNITUDES``.
    An int8/int4/codebook table's scales first, then a float table's values (a codebook's shared rows: the index
    is then a row of ``embeddings.npy``, not a word); else None. Scanned in blocks of ``_SCAN_ROWS`` rows."""
    if scales is not None:
        peaks = np.abs(np.asarray(scales, dtype=np.float64))
        bad = np.flatnonzero(~_usable(peaks))
        if len(bad):
            return BadRow(int(bad[0]), _problem(float(peaks[bad[0]])), True)
    if table.dtype.kind != "f":
        return None
    for start in range(0, len(table), _SCAN_ROWS):
        block = np.asarray(table[start : start + _SCAN_ROWS])
        peaks = np.abs(block).max(axis=1, initial=0) if block.size else np.zeros(len(block))
        bad = np.flatnonzero(~_usable(peaks))
        if len(bad):
            return BadRow(start + int(bad[0]), _problem(float(peaks[bad[0]])), False)
    return None


def bad_row_error(folder: Path, bad: BadRow, words: list[str]) -> ModelFolderError:
    where = folder / (SCALES_FILE if bad.in_scales else EMBEDDINGS_FILE)
    label = f" ({words[bad.row]!r})" if bad.row < len(words) else ""
    return ModelFolderError(f"{where}: row {bad.row}{label} {bad.problem} (the first such row); the table is damaged: "
                            "rebuild or re-export the model")


@dataclass
class ModelFolder:
    """A model folder's parts, checked against each other."""

    config: dict
    table: np.ndarray
    words: list[str]  # the label of every row
    teacher_tokenizer: Tokenizer | None  # tokenizer.json: the back-off pieces, or the words
    scales: np.ndarray | None
    arrays: dict[str, np.ndarray]  # the folder's other .npy files (pca_mean, word_contexts, ...), memory-mapped
    codes: np.ndarray | None = None  # a codebook table's shared row of each row (``swembed.runtime.storage``)
    kind_weights: dict[str, np.ndarray] = field(default_factory=dict)  # "query"/"document" -> (V,) float32 weights


def _load_array(path: Path, mmap: bool) -> np.ndarray:
    """A ``.npy`` file of the folder (a regular file: ``has_file``), memory-mapped (or read whole, not ``mmap``);
    never a pickle. Its size must be what its header declares, so no read goes past what it holds."""
    has_file(path)
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(NPY_MAGIC))
        array = np.load(path, mmap_mode="r", allow_pickle=False) if magic in (NPY_MAGIC, b"") else None
    except (ValueError, OSError, EOFError) as exc:
        raise ModelFolderError(f"{path}: unreadable or truncated .npy file ({exc})") from None
    if array is None and NPY_MAGIC.startswith(magic):
        raise ModelFolderError(f"{path}: unreadable or truncated .npy file (it ends within NumPy's magic bytes)")
    if array is None:
        raise ModelFolderError(f"{path}: not a .npy array file (it does not start with NumPy's magic bytes "
                               "\\x93NUMPY)")
    size = path.stat().st_size
    if array.offset + array.nbytes != size:
        raise ModelFolderError(f"{path}: {size:,} bytes, but its header declares {array.offset + array.nbytes:,}; "
                               "a damaged .npy file")
    return array if mmap else np.array(array)


def read_model_folder(folder: Path, mmap: bool = True, scan_values: bool | None = None) -> ModelFolder:
    """Read and check a model folder: the config's schema, the table's shape and dtype against the
    vocabulary, the vocabulary's lines (``check_words``), the scales of an int8 table, the piece rows, an
    ensemble's sub-spaces, a tokenizer.json present whenever the tokenisation rules need one (its absence must
    be declared: ``"tokenizer": null``), and finite values. The finite-value scan reads the whole table, so it
    is skipped when the folder's ownership marker (``.swembed-output.json``, written by swembed with the folder)
    records it (``TABLE_CHECK``) for this very file (same size and modification time); ``scan_values`` True or
    False forces it or skips it. The record lives in the marker, not config.json, so that a saved copy of a
    loaded model has the same model files byte for byte."""
    folder = Path(folder)
    if not folder.is_dir():
        if folder.exists():
            raise ModelFolderError(f"{folder}: a file, not a table folder; give the folder that holds {CONFIG_FILE}, "
                                   f"{VOCAB_FILE} and {EMBEDDINGS_FILE}")
        raise ModelFolderError(f"model folder not found: {folder}")
    config = read_config(folder)
    table = _load_array(folder / EMBEDDINGS_FILE, mmap) if has_file(folder / EMBEDDINGS_FILE) else None
    if table is None:
        raise ModelFolderError(f"{folder}: {EMBEDDINGS_FILE} is missing")
    table, codes = _decode_storage(folder, config, table, mmap)
    if table.shape[1] == 0 or config.get("dim", table.shape[1]) != table.shape[1]:
        raise ModelFolderError(f"{folder}: {EMBEDDINGS_FILE} has {table.shape[1]} columns and config.json says dim "
                               f"{json.dumps(config.get('dim'))}; a table needs dim >= 1 columns, as declared")
    rows = len(codes) if codes is not None else table.shape[0]
    words = _read_words(folder, rows)
    if len(words) != rows:
        raise ModelFolderError(f"{folder}: {len(words)} words in {VOCAB_FILE} but {rows} table rows")
    subspaces = (config.get("ensemble") or {}).get("subspaces")
    if subspaces and sum(s["dim"] for s in subspaces) != table.shape[1]:
        raise ModelFolderError(f"{folder / CONFIG_FILE}: the ensemble subspaces' dims add up to "
                               f"{sum(s['dim'] for s in subspaces)}, but the table has {table.shape[1]} columns")
    scales = _read_scales(folder, table, codes, len(words))
    subword = _read_tokenizer(folder, config)
    _check_row_ranges(folder / CONFIG_FILE, config, len(words))
    blocks = [config[name]["rows"][0] for name in ROW_BLOCKS if config.get(name)]
    languages = [(tuple(spec["rows"]), spec.get("tokenization", {}))
                 for spec in (config.get("languages") or {}).values()]
    ranges = languages or [((0, min(blocks, default=len(words))), config.get("tokenization", {}))]
    check_words(folder / VOCAB_FILE, words, [span for span, _ in ranges],
                [rules.get("lowercase", True) for _, rules in ranges])
    if scan_values is None:
        scan_values = read_marker(folder).get(TABLE_CHECK) != table_stamp(folder / EMBEDDINGS_FILE)
    if scan_values:
        bad = first_bad_row(table, scales)
        if bad is not None:
            raise bad_row_error(folder, bad, words if bad.in_scales or codes is None else [])
    arrays = {p.stem: _load_array(p, True) for p in sorted(folder.glob("*.npy"))
              if p.name not in (EMBEDDINGS_FILE, SCALES_FILE, CODES_FILE)}
    return ModelFolder(config, table, words, subword, scales, arrays, codes, _read_kind_weights(folder, config, rows))


def _read_kind_weights(folder: Path, config: dict, rows: int) -> dict[str, np.ndarray]:
    """The per-row weights of query and document texts that config.json names (``KIND_WEIGHTS``): each file
    ``KIND_WEIGHT_FILES[kind]``, a (rows,) float32 array of values within ``KIND_WEIGHT_RANGE``."""
    named = config.get(KIND_WEIGHTS)
    if named is None:
        return {}
    where = folder / CONFIG_FILE
    expected = ", ".join(f'"{kind}": "{name}"' for kind, name in KIND_WEIGHT_FILES.items())
    if not isinstance(named, dict) or any(KIND_WEIGHT_FILES.get(kind) != name for kind, name in named.items()):
        raise ModelFolderError(f"{where}: {KIND_WEIGHTS} must be an object of some of {{{expected}}}, got "
                               f"{json.dumps(named)}")
    weights = {}
    for kind, name in named.items():
        if not has_file(folder / name):
            raise ModelFolderError(f"{folder}: {name} is missing ({KIND_WEIGHTS} in {CONFIG_FILE} names it)")
        array = _load_array(folder / name, False)
        if array.shape != (rows,) or array.dtype != np.float32:
            raise ModelFolderError(f"{folder / name}: expected ({rows},) float32, one weight per table row, got "
                                   f"shape {array.shape} {array.dtype}")
        low, high = KIND_WEIGHT_RANGE
        bad = np.flatnonzero(~((array >= low) & (array <= high)))
        if len(bad):
            raise ModelFolderError(f"{folder / name}: row {bad[0]} has weight {array[bad[0]]}, outside {low:g} to "
                                   f"{high:g} (the first such row)")
        weights[kind] = array
    return weights


def _read_words(folder: Path, rows: int) -> list[str]:
    """``vocab.txt``'s labels; a missing or non-UTF-8 file is refused, and so is one far larger than ``rows``
    labels can be (``VOCAB_BYTES_PER_ROW``)."""
    if not has_file(folder / VOCAB_FILE, rows * VOCAB_BYTES_PER_ROW + VOCAB_BYTES_SLACK):
        raise ModelFolderError(f"{folder}: {VOCAB_FILE} is missing")
    try:
        return read_vocab(folder / VOCAB_FILE)
    except UnicodeDecodeError as exc:
        raise ModelFolderError(f"{folder / VOCAB_FILE}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _read_scales(folder: Path, table: np.ndarray, codes: np.ndarray | None, rows: int) -> np.ndarray | None:
    """``scales.npy``: present, with one scale per row, exactly when the table is int8, int4 or a codebook."""
    scales = _load_array(folder / SCALES_FILE, False) if has_file(folder / SCALES_FILE) else None
    scaled = table.dtype == np.int8 or codes is not None
    if scaled != (scales is not None) or (scales is not None and scales.shape != (rows,)):
        raise ModelFolderError(f"{folder}: an int8, int4 or codebook table needs {SCALES_FILE} with one scale per "
                               "row, and only such a table has one")
    return scales


def _read_tokenizer(folder: Path, config: dict) -> Tokenizer | None:
    """The folder's ``tokenizer.json`` (the teacher's sub-word tokenizer), or None where config.json declares
    ``"tokenizer": null``; a missing or unreadable one is refused."""
    if config.get("tokenizer", TOKENIZER_FILE) is None:
        return None
    if not has_file(folder / TOKENIZER_FILE, JSON_BYTES[TOKENIZER_FILE]):
        raise ModelFolderError(f"{folder}: {TOKENIZER_FILE} is missing; the table's tokenisation needs it for the "
                               "sub-word back-off (restore it, or declare \"tokenizer\": null in config.json)")
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    except Exception as exc:  # noqa: BLE001 - the tokenizers library raises plain Exceptions
        raise ModelFolderError(f"{folder / TOKENIZER_FILE}: not a tokenizers file ({exc})") from None
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _decode_storage(folder: Path, config: dict, table: np.ndarray, mmap: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """(the table as the runtime indexes it, the codebook's row codes or None), checked against the storage that
    config.json declares (``swembed.runtime.storage``): an int4 table unpacks to int8 values (scaled as int8 rows
    are), a codebook table is its shared rows plus ``codes.npy``."""
    kind = storage_kind(config)
    where = folder / EMBEDDINGS_FILE
    if kind not in STORAGE_KINDS:
        raise ModelFolderError(f"{folder / CONFIG_FILE}: storage kind must be one of {STORAGE_KINDS}, got {kind!r}")
    if kind == "int4":
        dim = config.get("dim")
        if (table.ndim != 2 or table.dtype != np.uint8 or not isinstance(dim, int)
                or table.shape[1] != (dim + 1) // 2):
            raise ModelFolderError(f"{where}: an int4 table is (rows, ceil(dim/2)) uint8 with the dim in config.json, "
                                   f"got shape {table.shape} {table.dtype}, dim {json.dumps(dim)}")
        return unpack_int4(table, dim), None
    if table.ndim != 2 or table.dtype not in TABLE_DTYPES:
        raise ModelFolderError(f"{where}: expected a 2-D table of {'/'.join(TABLE_DTYPES)}, "
                               f"got shape {table.shape} {table.dtype}")
    if kind == "dense":
        return table, None
    if not has_file(folder / CODES_FILE):
        raise ModelFolderError(f"{folder}: a codebook table needs {CODES_FILE}")
    codes = _load_array(folder / CODES_FILE, mmap)
    if codes.ndim != 1 or codes.dtype.kind not in "iu" or (len(codes) and not 0 <= codes.min() <= codes.max() <
                                                               table.shape[0]):
        raise ModelFolderError(f"{folder / CODES_FILE}: expected one integer code per row below the "
                               f"{table.shape[0]} shared rows, got shape {codes.shape} {codes.dtype}")
    return table, codes


def write_model_folder(
    out: Path,
    table: np.ndarray,
    words: list[str],
    config: dict,
    tokenizer_json: str | None,
    extra_arrays: dict[str, np.ndarray] | None = None,
    overwrite: bool = False,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """Write a complete model folder atomically: built in a temp folder beside ``out``, then renamed (an existing
    ``out`` only when ``overwrite`` and swembed owns it; never one that holds ``inputs``)."""
    codes = (extra_arrays or {}).get("codes")  # a codebook table: its rows are codes into shared rows
    if table.ndim != 2 or (table.shape[0] if codes is None else len(codes)) != len(words):
        raise ModelFolderError(f"table shape {table.shape} does not match {len(words)} words")
    bad = [w for w in words if not w or "\n" in w]
    if bad:
        raise ModelFolderError(f"vocabulary has {len(bad)} empty or multi-line words, e.g. {bad[:3]!r}")
    scales = (extra_arrays or {}).get("scales")
    bad_row = first_bad_row(table, scales)
    if bad_row is not None:
        label = f" ({words[bad_row.row]!r})" if codes is None or bad_row.in_scales else ""
        raise ModelFolderError(f"table row {bad_row.row}{label} {bad_row.problem}; {out} not written")
    record: dict = {}
    with atomic_directory(out, overwrite, "model", inputs, record) as tmp:
        np.save(tmp / EMBEDDINGS_FILE, table)
        record[TABLE_CHECK] = table_stamp(tmp / EMBEDDINGS_FILE)  # scanned above: loads skip the scan
        (tmp / VOCAB_FILE).write_text("".join(w + "\n" for w in words), encoding="utf-8")
        if tokenizer_json is not None:
            (tmp / TOKENIZER_FILE).write_text(tokenizer_json, encoding="utf-8")
        config = {**config, "tokenizer": TOKENIZER_FILE if tokenizer_json is not None else None}
        for name, array in (extra_arrays or {}).items():
            np.save(tmp / f"{name}.npy", array)
        full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **config}
        full.setdefault("dim", int(table.shape[1]))
        full.setdefault("vocab_size", len(words))
        full.setdefault("dtype", str(table.dtype))
        (tmp / CONFIG_FILE).write_text(json.dumps(full, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        check_loads(tmp, Path(out))
    return Path(out)


def check_loads(tmp: Path, out: Path) -> None:
    """The round-trip check of every table folder swembed writes: the folder just written in ``tmp`` loads through
    the real loader (``read_model_folder``: its values were scanned before writing), or ``out`` is not written."""
    try:
        read_model_folder(tmp, mmap=True, scan_values=False)
    except ModelFolderError as exc:
        problem = str(exc).replace(str(tmp), str(out))
        raise ModelFolderError(f"{out} not written: the table folder would not load ({problem})") from None


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    """np.save to a temp file beside ``path``, then rename."""
    with atomic_file(path, checked=False) as tmp, open(tmp, "wb") as handle:
        np.save(handle, array)


def update_config(folder: Path, patch: dict) -> None:
    """Merge ``patch`` into a model folder's config.json (atomic replace)."""
    config = read_config(Path(folder))
    config.update(patch)
    path = Path(folder) / CONFIG_FILE
    with atomic_file(path, checked=False) as tmp:
        tmp.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
