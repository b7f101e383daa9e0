"""The mteb adapter runs the real mteb evaluation code and agrees with `swembed eval` exactly."""
import numpy as np
import pytest

from swembed.eval.sts import evaluate_sts
from swembed.runtime import StaticEmbedder, WordTokenizer


def tiny_model():
    rng = np.random.default_rng(0)
    words = ["a", "cat", "dog", "sat", "ran", "the", "mat", "far", "big", "small"]
    return StaticEmbedder(rng.normal(size=(len(words), 8)).astype(np.float32),
                          WordTokenizer({w: i for i, w in enumerate(words)}))


def write_stsb(root, n=40, seed=0):
    rng = np.random.default_rng(seed)
    vocab = ["a", "cat", "dog", "sat", "ran", "the", "mat", "far", "big", "small", "zzz"]
    (root / "stsb").mkdir()
    lines = []
    for i in range(n):
        s1 = " ".join(rng.choice(vocab, 4))
        s2 = " ".join(rng.choice(vocab, 4))
        lines.append(f"g\tf\t2012\t{i}\t{rng.uniform(0, 5):.2f}\t{s1}\t{s2}")
    (root / "stsb" / "sts-test.csv").write_text("\n".join(lines) + "\n")


def test_mteb_adapter_agrees_with_swe_eval(tmp_path):
    mteb = pytest.importorskip("mteb")
    from swembed.eval.mteb_tasks import local_sts_task
    from swembed.integrations.mteb import mteb_encoder

    write_stsb(tmp_path)
    model = tiny_model()
    ours = evaluate_sts(model.encode, tmp_path, ("STSBenchmark",))["STSBenchmark"]
    result = mteb.evaluate(mteb_encoder(model), local_sts_task("STSBenchmark", tmp_path), cache=None,
                           show_progress_bar=False)
    theirs = result.task_results[0].scores["test"][0]["cosine_spearman"] * 100
    assert theirs == pytest.approx(ours, abs=1e-3)
