"""A swembed model on Spark executors: the folder broadcast once, loaded once per Python worker, and
vectors carried between stages as float32 bytes (``dim * 4`` bytes a row, as ``swembed dedup`` stores them, so the
threshold is applied to the numbers the table gives)."""
from __future__ import annotations

import atexit
import hashlib
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_MODELS: dict[str, object] = {}  # per Python worker: content digest -> loaded model


def broadcast_model(spark, model_path: str | Path) -> tuple[object, str]:
    """Broadcast a model folder's files (the table included) to the executors; returns it and its digest."""
    folder = Path(model_path)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a swembed model folder (no config.json)")
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
    digest = hashlib.sha256()
    for name, data in files.items():
        digest.update(name.encode() + hashlib.sha256(data).digest())
    return spark.sparkContext.broadcast(files), digest.hexdigest()


def worker_model(broadcast, digest: str):
    """The broadcast model, written to a local folder (removed at exit) and loaded once per Python worker."""
    model = _MODELS.get(digest)
    if model is None:
        from swembed.runtime.embedder import load

        folder = Path(tempfile.mkdtemp(prefix="swembed-model-"))
        atexit.register(shutil.rmtree, folder, True)
        for name, data in broadcast.value.items():
            (folder / name).write_bytes(data)
        model = _MODELS[digest] = load(folder)
    return model


def vectors_to_bytes(vectors: np.ndarray) -> list[bytes]:
    """One float32 byte string per row."""
    rows = np.ascontiguousarray(vectors, dtype=np.float32)
    return [row.tobytes() for row in rows]


def vectors_from_bytes(values: Sequence[bytes], dim: int) -> np.ndarray:
    """The float32 matrix of byte strings of one or more rows each (``vectors_to_bytes``'s inverse)."""
    return np.frombuffer(b"".join(values), dtype=np.float32).reshape(-1, dim)


def require_columns(df, *columns: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"DataFrame has no column {missing[0]!r}; columns are {df.columns}")


def encode(df, model_path: str | Path, text_col: str = "text", out_col: str = "embedding"):
    """``df`` with an ``out_col`` array<float> column of L2-normalised sentence vectors."""
    from pyspark.sql.types import ArrayType, FloatType, StructField, StructType

    require_columns(df, text_col)
    broadcast, digest = broadcast_model(df.sparkSession, model_path)
    schema = StructType([*df.schema.fields, StructField(out_col, ArrayType(FloatType()))])

    def add_vectors(frames):
        model = worker_model(broadcast, digest)
        for frame in frames:
            vectors = model.encode(frame[text_col].fillna("").astype(str).tolist())
            yield frame.assign(**{out_col: list(vectors)})

    return df.mapInPandas(add_vectors, schema)
