"""Run the real ``mteb`` package on swembed models, offline.

``mteb_encoder(model)`` wraps a loaded swembed model (or anything with ``encode(list[str])``) as an mteb
encoder, for any mteb task:

    import mteb, swembed
    from swembed.integrations.mteb import mteb_encoder
    result = mteb.evaluate(mteb_encoder(swembed.load("models/minilm-256")), mteb.get_tasks(["Banking77Classification"]))

Tasks read from local files instead of the hub (``swembed eval --suite mteb``): ``swembed.eval.mteb_tasks``.
"""
from __future__ import annotations


def require_mteb():
    """The mteb module, or an ImportError that says how to install it."""
    try:
        import mteb
    except ImportError as exc:  # pragma: no cover - message only
        raise ImportError("this needs the mteb package: pip install mteb") from exc
    return mteb


def mteb_encoder(model, name: str = "swembed/static-embeddings", revision: str = "local"):
    """An mteb ``AbsEncoder`` around ``model.encode`` (cosine similarity)."""
    require_mteb()
    from mteb.models.abs_encoder import AbsEncoder
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    class SweMtebEncoder(AbsEncoder):
        def __init__(self, wrapped, meta) -> None:
            self.model = wrapped
            self.mteb_model_meta = meta

        def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
            texts = [text for batch in inputs for text in batch["text"]]
            return self.model.encode(texts)

    dim = getattr(model, "dim", None)
    meta = ModelMeta(
        loader=None, name=name, revision=revision, release_date=None, languages=None, n_parameters=None,
        memory_usage_mb=None, max_tokens=None, embed_dim=dim, license=None, open_weights=True,
        public_training_code=None, public_training_data=None, framework=["NumPy"],
        similarity_fn_name=ScoringFunction.COSINE, use_instructions=False, training_datasets=None,
    )
    return SweMtebEncoder(model, meta)
