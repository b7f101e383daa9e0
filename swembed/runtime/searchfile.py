"""`swembed search` and `swembed index`: a corpus file (lines of text, or the text column of .jsonl/.csv/.parquet
records: ``textfile.read_passages``) made into a ``SearchIndex``, searched (by cosine, BM25 or their hybrid), and its
hits printed as lines or JSON."""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

from swembed.runtime.embedder import StaticEmbedder, load
from swembed.runtime.index import SearchIndex
from swembed.runtime.lexical import check_alpha
from swembed.runtime.outputs import check_writable
from swembed.runtime.search import Hit
from swembed.runtime.textfile import read_passages, read_texts
from swembed.runtime.windows import check_width

SHOWN_CHARACTERS = 100  # of a passage, on its one line
_SPACE = re.compile(r"\s+")


def corpus_index(model: StaticEmbedder, corpus: str, text_column: str | None = None, dtype: str = "float32",
                 keep_texts: bool = True, lexical: bool = True, windows: int | None = None) -> SearchIndex:
    """The index of a corpus file, each passage's id its address in the file (a line; a parquet row)."""
    check_width(windows)  # before the corpus is read
    texts, positions, _ = read_passages(corpus, text_column)
    if not texts:
        raise ValueError(f"{corpus}: no passages to search; the corpus is empty")
    return model.index(texts, positions, dtype, keep_texts, lexical, windows)


def index_file(model_path: str, corpus: str, out: str, text_column: str | None = None, dtype: str = "float32",
               keep_texts: bool = True, overwrite: bool = False, lexical: bool = True,
               windows: int | None = None) -> str:
    """Write the index of ``corpus`` to the folder ``out`` (atomically); returns a summary."""
    check_width(windows)
    check_writable(Path(out), overwrite, [corpus, model_path])
    index = corpus_index(load(model_path), corpus, text_column, dtype, keep_texts, lexical, windows)
    index.save(out, overwrite)
    found = "" if index.windows is None else f", {len(index.windows.vectors)} windows of {index.windows.width} words"
    return f"{len(index)} passages -> {out} ({index.dim} {index.dtype}{found})"


def search_files(model_path: str, queries: Sequence[str] | None, queries_file: str | None, corpus: str | None,
                 index_folder: str | None, text_column: str | None = None, top_k: int = 10, mode: str = "dense",
                 alpha: float | None = None, windows: int | None = None
                 ) -> tuple[SearchIndex, list[str], list[list[Hit]]]:
    """(the index searched, the queries, their hits): ``queries`` given, or the lines of ``queries_file``, ranked
    over the passages of ``corpus`` (with ``windows``: each long passage's windows of that many words too) or over
    the saved index ``index_folder`` by ``mode`` (``SearchIndex.search``)."""
    if top_k < 1:
        raise ValueError(f"--top-k must be at least 1, got {top_k}")
    if alpha is not None and mode != "hybrid":
        raise ValueError("--alpha weighs the hybrid score; give --mode hybrid with it")
    check_alpha(alpha)
    check_width(windows)
    if index_folder is not None and windows is not None:
        raise ValueError("--windows reads a corpus file into windows; a saved index holds its own (swembed index "
                         "--windows)")
    if index_folder is not None and text_column is not None:
        raise ValueError("--text-column reads a corpus file; a saved index holds its passages already")
    asked = list(queries) if queries is not None else read_texts(str(queries_file))[0]
    if not asked:
        raise ValueError(f"{queries_file}: no queries; the file is empty")
    model = load(model_path)
    index = (SearchIndex.load(index_folder, model) if index_folder is not None
             else corpus_index(model, str(corpus), text_column, lexical=mode != "dense", windows=windows))
    return index, asked, cast("list[list[Hit]]", index.search(asked, top_k, mode, alpha))  # a list each


def one_line(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    """``text`` on one line (runs of white space as one space), cut to ``limit`` characters with an ellipsis."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def hit_lines(index: SearchIndex, queries: Sequence[str], hits: Sequence[Sequence[Hit]],
              as_json: bool = False) -> Iterator[str]:
    """What ``swembed search`` prints: per query a line naming it, then one line per hit (rank, score, id, the
    passage on one line; a hybrid or lexical search: its cosine after the score, as ``dense 0.1234``); ``as_json``:
    one JSON object per query, its hits with their whole texts (and ``dense`` and ``lexical`` where searched so)."""
    for query, found in zip(queries, hits):
        texts = index.hit_texts(found)
        if as_json:
            yield json.dumps({"query": query, "hits": [hit_record(rank, hit, text)
                                                       for rank, (hit, text) in enumerate(zip(found, texts), 1)]},
                             ensure_ascii=False)
            continue
        yield f"query: {one_line(query)}"
        for rank, (hit, text) in enumerate(zip(found, texts), 1):
            dense = f"dense {hit.dense:.4f}  " if hit.lexical is not None else ""
            yield f"{rank:>4}  {hit.score:.4f}  {dense}{hit.id}  {one_line(text) if text is not None else ''}".rstrip()


def hit_record(rank: int, hit: Hit, text: str | None) -> dict:
    """One hit as JSON: rank, score, id, row, text (None when the index keeps none), and for a hybrid or lexical
    search its cosine (``dense``) and BM25 score (``lexical``) beside the score it was ranked by."""
    record = {"rank": rank, "score": round(hit.score, 6), "id": hit.id, "index": hit.index, "text": text}
    if hit.lexical is not None:
        record.update(dense=round(float(hit.dense or 0.0), 6), lexical=round(hit.lexical, 6))
    return record
