"""What runs the teacher: ONNX Runtime for a float32 encoder on a CPU (``auto`` where installed), else torch
(issue 57's build budget on CPUs without native bfloat16)."""
import numpy as np
import pytest
import torch

from swembed.teachers.base import TeacherError, onnx_runtime_available
from swembed.teachers.onnx_runtime import pick_runtime
from tests.conftest import make_sentences, run_cli, small_build_args

needs_onnx = pytest.mark.skipif(not onnx_runtime_available(), reason="onnxruntime and onnx (the build extra)")
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@needs_onnx
def test_auto_runs_a_float32_encoder_on_the_cpu_with_onnx_runtime_and_everything_else_with_torch():
    assert pick_runtime("auto", CPU, torch.float32, "bert") == "onnx"
    assert pick_runtime("auto", CPU, torch.bfloat16, "bert") == "torch"
    assert pick_runtime("auto", CUDA, torch.float32, "bert") == "torch"
    assert pick_runtime("auto", CPU, torch.float32, "gemma3_text") == "torch"  # not checked against torch
    assert pick_runtime("torch", CPU, torch.float32, "bert") == "torch"
    assert pick_runtime("onnx", CPU, torch.float32, "gemma3_text") == "onnx"  # asked for: the user's call
    with pytest.raises(TeacherError, match="runs a float32 teacher on the CPU, not bfloat16 on cpu"):
        pick_runtime("onnx", CPU, torch.bfloat16)
    with pytest.raises(TeacherError, match="must be one of auto, torch, onnx"):
        pick_runtime("tensorrt", CPU, torch.float32)


@needs_onnx
@pytest.mark.teacher
def test_onnx_runtime_gives_the_torch_teachers_token_and_sentence_vectors():
    """Batches of other shapes than the export's (longer, wider, padded rows): the same vectors at every text
    position and the same sentence vectors, from a file exported once."""
    from swembed.teachers import load_teacher

    on_torch = load_teacher("minilm", device="cpu", precision="float32", runtime="torch")
    on_onnx = load_teacher("minilm", device="cpu", precision="auto", runtime="onnx")  # onnx: auto means float32
    assert (on_torch.onnx, on_onnx.runtime, on_onnx.dtype) == (None, "onnx", torch.float32)
    exported = on_onnx.onnx.path.stat().st_mtime_ns
    texts = ["ok", *make_sentences(12, seed=3), "Protein kinase C phosphorylates the receptor in vitro, " * 6]
    for batch in (texts[:1], texts[1:4], texts):
        a, b = on_torch.forward(batch), on_onnx.forward(batch)
        real = torch.as_tensor(np.stack([o[:, 0] >= 0 for o in a.offsets]))
        assert all((x == y).all() for x, y in zip(a.offsets, b.offsets))
        assert torch.allclose(a.hidden[real], b.hidden[real], atol=2e-4)
        assert torch.allclose(a.pooled, b.pooled, atol=1e-5)
    again = load_teacher("minilm", device="cpu", precision="float32", runtime="auto")
    assert again.runtime == "onnx" and again.onnx.path == on_onnx.onnx.path
    assert again.onnx.path.stat().st_mtime_ns == exported  # read from the cache, not exported again


def test_onnx_asked_where_it_cannot_run_is_refused_before_any_work(tmp_path, tiny_corpus):
    out = tmp_path / "model"
    for flags, says in ((["--teacher-dtype", "bfloat16"], "runs a float32 teacher on the CPU"),
                        (["--device", "cuda"], "runs a float32 teacher on the CPU")):
        result = run_cli([*small_build_args(tiny_corpus, out), "--teacher-runtime", "onnx", *flags],
                         same_process=True)
        assert result.returncode != 0 and says in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert not out.exists() and not (tmp_path / "model.work").exists()
