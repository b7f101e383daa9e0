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
    position and the same sentence vectors, from a file exported once and then run without the torch weights."""
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
    a, b = on_torch.forward(texts), again.forward(texts)
    assert torch.allclose(a.pooled, b.pooled, atol=1e-5) and again.dim == on_torch.dim == 384
    assert "model" not in vars(again)  # the cached export ran it: the torch weights were never loaded


def test_onnx_asked_where_it_cannot_run_is_refused_before_any_work(tmp_path, tiny_corpus):
    out = tmp_path / "model"
    for flags, says in ((["--teacher-dtype", "bfloat16"], "runs a float32 teacher on the CPU"),
                        (["--device", "cuda"], "runs a float32 teacher on the CPU")):
        result = run_cli([*small_build_args(tiny_corpus, out), "--teacher-runtime", "onnx", *flags],
                         same_process=True)
        assert result.returncode != 0 and says in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert not out.exists() and not (tmp_path / "model.work").exists()


@needs_onnx
def test_an_int8_teacher_runs_only_on_onnx_runtime_on_the_cpu():
    assert pick_runtime("auto", CPU, torch.float32, "bert", quantized=True) == "onnx"
    assert pick_runtime("onnx", CPU, torch.float32, "gemma3_text", quantized=True) == "onnx"
    for runtime, device in (("torch", CPU), ("auto", CUDA), ("onnx", CUDA)):
        with pytest.raises(TeacherError, match="teacher dtype int8 runs on ONNX Runtime on the CPU"):
            pick_runtime(runtime, device, torch.float32, "bert", quantized=True)


@needs_onnx
@pytest.mark.teacher
def test_the_int8_teacher_stays_close_to_float32_and_its_build_says_so(tmp_path, tiny_corpus):
    """ONNX Runtime's int8 MiniLM: sentence vectors within cosine 0.97 of float32 torch's, token vectors close at
    every text position, its file quantised once beside the float32 export; a build with it records int8."""
    import json

    from swembed.teachers import load_teacher

    exact = load_teacher("minilm", device="cpu", precision="float32", runtime="torch")
    int8 = load_teacher("minilm", device="cpu", precision="int8")
    assert (int8.runtime, int8.quantized, exact.quantized) == ("onnx", True, False)
    assert int8.onnx.path.name.endswith("-int8.onnx") and int8.onnx.path.is_file()
    texts = make_sentences(16, seed=5)
    a, b = exact.forward(texts), int8.forward(texts)
    pooled = torch.nn.functional.cosine_similarity(a.pooled, b.pooled)
    assert pooled.min() > 0.97 and not torch.allclose(a.pooled, b.pooled, atol=1e-5)  # close, and really int8
    real = torch.as_tensor(np.stack([o[:, 0] >= 0 for o in a.offsets]))
    assert torch.nn.functional.cosine_similarity(a.hidden[real], b.hidden[real]).mean() > 0.95
    quantised = int8.onnx.path.stat().st_mtime_ns
    assert load_teacher("minilm", device="cpu", precision="int8").onnx.path.stat().st_mtime_ns == quantised
    fidelity = json.loads(int8.onnx.path.with_suffix(".fidelity.json").read_text())  # the probe, kept beside it
    assert 0.98 < fidelity["cosine_min"] <= fidelity["cosine_mean"] < 1.0 and fidelity["sentences"] == 16

    out = tmp_path / "model"
    result = run_cli([*small_build_args(tiny_corpus, out), "--teacher-dtype", "int8"], same_process=True)
    assert result.returncode == 0, result.stderr
    stats = json.loads((out / "config.json").read_text())["build"]["stages"]["extract"]["stats"]
    assert (stats["teacher_dtype"], stats["teacher_runtime"]) == ("int8", "onnx")


@needs_onnx
@pytest.mark.teacher
def test_an_int8_teacher_that_strays_from_float32_is_refused_in_one_line(tmp_path, tiny_corpus, monkeypatch):
    """The probe's bar raised above what MiniLM keeps at int8 (as mpnet's 0.87 is below it): the teacher is refused
    naming its measured cosine, and a build says so in one line."""
    from swembed.teachers import load_teacher, onnx_runtime

    load_teacher("minilm", device="cpu", precision="int8")  # quantised and probed at the real bar
    monkeypatch.setattr(onnx_runtime, "INT8_MIN_COSINE", 0.99999)
    with pytest.raises(TeacherError, match=r"teacher minilm at int8 strays from float32: sentence cosine 0\.9\d\d "
                                           r"on average over 16 probe sentences"):
        load_teacher("minilm", device="cpu", precision="int8")
    result = run_cli([*small_build_args(tiny_corpus, tmp_path / "model"), "--teacher-dtype", "int8"],
                     same_process=True)
    assert result.returncode != 0 and "strays from float32" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "model").exists()


def test_int8_asked_where_it_cannot_run_is_refused_before_any_work(tmp_path, tiny_corpus):
    out = tmp_path / "model"
    for flags in (["--teacher-runtime", "torch"], ["--device", "cuda"]):
        result = run_cli([*small_build_args(tiny_corpus, out), "--teacher-dtype", "int8", *flags], same_process=True)
        assert result.returncode != 0 and "--teacher-dtype int8 runs the teacher on ONNX Runtime" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert not out.exists() and not (tmp_path / "model.work").exists()


@needs_onnx
@pytest.mark.teacher
def test_quantising_the_teacher_logs_one_line_of_its_own(tmp_path, caplog):
    """ONNX Runtime's quantiser logs dozens of lines on the root logger; a build shows only swembed's own line, and
    logging works as before once the file is written."""
    import logging
    import shutil

    from swembed.teachers import load_teacher
    from swembed.teachers.onnx_runtime import quantize_int8

    export = load_teacher("minilm", device="cpu", precision="float32", runtime="onnx").onnx.path
    copy = tmp_path / export.name
    shutil.copyfile(export, copy)
    with caplog.at_level(logging.DEBUG):
        out = quantize_int8(copy)
        logging.getLogger("after").warning("still heard")
    assert out.is_file() and out.name.endswith("-int8.onnx")
    assert [(r.name, r.getMessage().split(" ")[0]) for r in caplog.records] == [
        ("swembed.teachers.onnx_runtime", "quantising"), ("after", "still")]
