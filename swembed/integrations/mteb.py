"""Run the real ``mteb`` package on swembed models, offline.

``mteb_encoder(model)`` wraps a loaded swembed model (or anything with ``encode(list[str])``) as an mteb
encoder; ``local_sts_task(name, data_dir)`` returns an mteb STS task whose data comes from local files
(mteb skips its download when ``task.dataset`` is set and ``task.data_loaded`` is True).

    import mteb, swembed
    from swembed.integrations.mteb import mteb_encoder, local_sts_task
    result = mteb.evaluate(mteb_encoder(swembed.load("models/minilm-256")),
                           local_sts_task("STSBenchmark", "../shared/data/eval"), cache=None)
"""
from __future__ import annotations

from pathlib import Path


def _require_mteb():
    try:
        import mteb
    except ImportError as exc:  # pragma: no cover - message only
        raise ImportError("this needs the mteb package: pip install mteb") from exc
    return mteb


def mteb_encoder(model, name: str = "swembed/static-embeddings", revision: str = "local"):
    """An mteb ``AbsEncoder`` around ``model.encode`` (cosine similarity)."""
    _require_mteb()
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


def local_sts_task(name: str, data_dir: str | Path):
    """The mteb STS task ``name`` (STS12..16, STSBenchmark, SICK-R) with its test split read from local files."""
    mteb = _require_mteb()
    from datasets import Dataset

    from swembed.eval.sts import load_pair_set

    pairs = load_pair_set(data_dir, name)
    task = mteb.get_task(name)
    task.dataset = {"test": Dataset.from_dict({"sentence1": pairs.s1, "sentence2": pairs.s2,
                                               "score": pairs.gold.tolist()})}
    task.data_loaded = True
    return task
