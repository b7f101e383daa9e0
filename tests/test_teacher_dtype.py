"""The teacher's dtype: ``auto`` picks bfloat16 only where the CPU computes it natively (issue 57: bfloat16 is
2-3x faster than float32 with AVX512-BF16 or AMX and ~6x slower on an AVX2-only CPU)."""
import pytest
import torch

from swembed.teachers.base import TeacherError, cpu_has_native_bf16, pick_dtype

AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n"
AVX512_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
AMX = "processor\t: 0\nflags\t\t: avx2 avx512f amx_bf16 amx_tile\n"


def test_native_bfloat16_is_read_from_the_cpu_flags():
    assert not cpu_has_native_bf16(AVX2_ONLY)
    assert cpu_has_native_bf16(AVX512_BF16) and cpu_has_native_bf16(AMX)
    assert not cpu_has_native_bf16("model name\t: avx512_bf16 in a name, not a flag\n")


@pytest.mark.parametrize("native", ["0", "1"])
def test_auto_picks_bfloat16_on_cuda_and_on_a_native_cpu_only(monkeypatch, native):
    monkeypatch.setenv("SWEMBED_NATIVE_BF16", native)
    expected = torch.bfloat16 if native == "1" else torch.float32
    assert pick_dtype(torch.device("cpu"), "auto") == expected
    assert pick_dtype(torch.device("cuda"), "auto") == torch.bfloat16
    assert pick_dtype(torch.device("cpu"), "float32") == torch.float32
    assert pick_dtype(torch.device("cpu"), "bfloat16") == torch.bfloat16
    with pytest.raises(TeacherError, match="teacher dtype must be one of auto, float32, bfloat16"):
        pick_dtype(torch.device("cpu"), "float16")


def test_no_shipped_recipe_pins_the_teacher_dtype():
    from pathlib import Path

    recipes = sorted((Path(__file__).resolve().parents[1] / "pipelines").glob("*.toml"))
    assert recipes
    pinned = [r.name for r in recipes if "teacher_dtype" in r.read_text()]
    assert pinned == []
