"""Run the real ``mteb`` package on swembed models, offline.

``mteb_encoder(model)`` wraps a loaded swembed model (or anything with ``encode(list[str])``) as an mteb
encoder, for any mteb task:

    import mteb, swembed
    from swembed.integrations.mteb import mteb_encoder
    result = mteb.evaluate(mteb_encoder(swembed.load("models/minilm-256")), mteb.get_tasks(["Banking77Classification"]))

Tasks read from local files instead of the hub (``swembed eval --suite mteb``): ``swembed.eval.mteb_tasks``.

Queries and documents encode with ``kind="query"`` / ``"document"`` (mteb's ``prompt_type``), so a table's query
weights (docs/format.md) apply to retrieval queries; every other text encodes with no kind.

``mteb_encoder(model, search="hybrid")`` (a swembed model) also ranks retrieval tasks with swembed's own search: it
indexes the task's corpus (``SearchIndex``, with the lexical postings) and ranks each query by ``search`` (dense,
lexical or hybrid: ``swembed.runtime.lexical``), mteb's ``SearchProtocol``; other tasks still only encode.
"""
from __future__ import annotations


def require_mteb():
    """The mteb module, or an ImportError that says how to install it."""
    try:
        import mteb
    except ImportError as exc:  # pragma: no cover - message only
        raise ImportError("this needs the mteb package: pip install mteb") from exc
    return mteb


def encode_kind(prompt_type) -> str | None:
    """swembed's ``encode`` kind for mteb's ``PromptType`` (``query``, ``document``; None for any other or none)."""
    value = getattr(prompt_type, "value", prompt_type)
    from swembed.runtime.embedder import ENCODE_KINDS

    return value if value in ENCODE_KINDS else None


def _parameters(function) -> set[str]:
    """The names of ``function``'s parameters (none where it has no signature)."""
    import inspect

    try:
        return set(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return set()


def mteb_encoder(model, name: str = "swembed/static-embeddings", revision: str = "local", search: str | None = None,
                 alpha: float | None = None, windows: int | None = None):
    """An mteb ``AbsEncoder`` around ``model.encode`` (cosine similarity); with ``search`` (``dense``, ``lexical`` or
    ``hybrid``, a swembed model), retrieval tasks rank through ``SearchIndex.search`` with that mode and ``alpha``
    (and an index built with ``windows``: each document's windows of that many words, ``swembed.runtime.windows``).
    mteb's role of the texts (``prompt_type``: query or document) is passed as ``encode``'s ``kind`` where it takes
    one (a swembed table: its query weights apply to the queries)."""
    require_mteb()
    if search is not None:
        from swembed.runtime.lexical import check_alpha, check_mode

        search = check_mode(search)
        check_alpha(alpha)  # None stays None: the index's own default
    from swembed.runtime.windows import check_width

    if check_width(windows) is not None and search is None:
        raise ValueError("windows apply to swembed's own search: give search (dense, lexical or hybrid) with them")
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    takes_kind = "kind" in _parameters(model.encode)

    class SweMtebEncoder(AbsEncoder):
        def __init__(self, wrapped, meta) -> None:
            self.model = wrapped
            self.mteb_model_meta = meta

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            texts = [text for batch in inputs for text in batch["text"]]
            kind = encode_kind(prompt_type) if takes_kind else None
            return self.model.encode(texts, kind=kind) if kind else self.model.encode(texts)

    class SweMtebSearch(SweMtebEncoder):
        def index(self, corpus, *, task_metadata, hf_split, hf_subset, encode_kwargs, num_proc=None, **kwargs):
            from mteb._create_dataloaders import _corpus_to_dict

            from swembed.runtime.index import SearchIndex

            rows = [_corpus_to_dict(row) for row in corpus]  # title + " " + text, as mteb encodes a document
            self.corpus_ids = [row["id"] for row in rows]
            self.search_index = SearchIndex.build(self.model, [row["text"] for row in rows], keep_texts=False,
                                                  lexical=search != "dense", windows=windows)

        def search(self, queries, *, task_metadata, hf_split, hf_subset, top_k, encode_kwargs, top_ranked=None,
                   num_proc=None, **kwargs):
            from mteb._create_dataloaders import _combine_queries_with_instruction_text

            texts = list(_combine_queries_with_instruction_text(queries)["text"])
            found = self.search_index.search(texts, top_k, mode=search, alpha=alpha)
            return {query: {self.corpus_ids[hit.index]: hit.score for hit in hits}
                    for query, hits in zip(queries["id"], found)}

    dim = getattr(model, "dim", None)
    meta = ModelMeta(
        loader=None, name=name, revision=revision, release_date=None, languages=None, n_parameters=None,
        memory_usage_mb=None, max_tokens=None, embed_dim=dim, license=None, open_weights=True,
        public_training_code=None, public_training_data=None, framework=["NumPy"],
        similarity_fn_name=ScoringFunction.COSINE,  # type: ignore[arg-type]  # mteb's StrEnum: not in 3.10 stubs
        use_instructions=False, training_datasets=None,
    )
    return (SweMtebEncoder if search is None else SweMtebSearch)(model, meta)
