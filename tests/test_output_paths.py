"""No command writes into its own inputs or onto a special file: every writer goes through
``outputs.check_writable``, whose rule a property test checks over generated output locations."""
import os
import stat
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, snapshot, write_tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_outputs import leftovers, refused

from swembed.dedup.records import kept_names
from swembed.runtime.outputs import OutputExistsError, check_writable

TEXTS = "the cat sat\na dog\n"


@pytest.fixture
def texts(tmp_path) -> Path:
    path = tmp_path / "t.txt"
    path.write_text(TEXTS)
    return path


def inside_the_model(model: Path, texts: Path, other: Path) -> dict[str, list]:
    """The issue's reproductions and their neighbours: each writer pointed into the model folder it reads."""
    return {
        "encode-table": ["encode", model, "--input", texts, "--output", model / "embeddings.npy", "--overwrite"],
        "encode-new-file": ["encode", model, "--input", texts, "--output", model / "scales.npy"],
        "eval-config": ["eval", model, "--json", model / "config.json", "--overwrite", "--data", model.parent],
        "shrink-onto-source": ["shrink", model, "--out", model, "--words", "4", "--overwrite"],
        "shrink-into-source": ["shrink", model, "--out", model / "small", "--words", "4"],
        "export-into-model": ["export", model, "--out", model / "copy"],
        "conformance-into-model": ["conformance", model, "--out", model / "conformance.json"],
        "ensemble-into-member": ["ensemble", model, other, "--out", other / "both"],
        "dedup-into-model": ["dedup", texts, "--model", model, "--out", model / "kept", "--quiet"],
        "encode-onto-input": ["encode", model, "--input", texts, "--output", texts, "--overwrite"],
    }


@pytest.mark.parametrize("case", list(inside_the_model(Path("m"), Path("t"), Path("o"))))
def test_no_command_writes_inside_its_inputs(tmp_path, tiny_model, texts, case):
    other = write_tiny_model(tmp_path / "other")
    args = inside_the_model(tiny_model, texts, other)[case]
    before = snapshot(tmp_path)
    line = refused(run_cli(args), args[0])
    assert "an input of this command" in line and "cannot be an output" in line
    assert snapshot(tmp_path) == before and not leftovers(tmp_path)


def test_special_files_are_never_replaced(tmp_path, tiny_model, texts):
    fifo = tmp_path / "ff"
    os.mkfifo(fifo)
    for args in (["encode", tiny_model, "--input", texts, "--output", fifo, "--overwrite"],
                 ["encode", tiny_model, "--input", texts, "--output", os.devnull, "--overwrite"],
                 ["conformance", tiny_model, "--out", fifo, "--overwrite"],
                 ["eval", tiny_model, "--json", fifo, "--overwrite", "--data", tmp_path / "nowhere"]):
        line = refused(run_cli(args), args[0])
        assert "not a regular file" in line
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISCHR(os.lstat(os.devnull).st_mode)
    assert not leftovers(tmp_path)


def test_conformance_replaces_its_own_file_only_with_overwrite(tmp_path, tiny_model):
    out = tmp_path / "c.json"
    assert run_cli(["conformance", tiny_model, "--out", out]).returncode == 0
    first = out.read_bytes()
    assert "already exists; pass --overwrite" in refused(run_cli(["conformance", tiny_model, "--out", out]),
                                                         "conformance")
    assert out.read_bytes() == first
    assert run_cli(["conformance", tiny_model, "--out", out, "--overwrite"]).returncode == 0
    assert not leftovers(tmp_path)


def test_lens_clusters_follows_the_output_rules(tmp_path):
    from llm_fixtures import bert_folder

    model = bert_folder(tmp_path / "bert")
    notes, centroids = tmp_path / "notes.json", tmp_path / "notes.centroids.npy"
    args = ["lens-clusters", "--model", model, "--k", "2", "--out", notes]
    for existing in (notes, centroids):
        existing.write_text("a user's file\n")
        line = refused(run_cli(args, same_process=True), "lens-clusters")
        assert line.endswith(f"{existing} already exists; pass --overwrite to replace it")
        assert existing.read_text() == "a user's file\n"
        existing.unlink()
    before = snapshot(model)
    inside = ["lens-clusters", "--model", model, "--k", "2", "--out", model / "notes.json"]
    line = refused(run_cli(inside, same_process=True), "lens-clusters")
    assert f"it lies inside {model}, an input of this command" in line and snapshot(model) == before
    assert run_cli(args, same_process=True).returncode == 0, "the clustering itself"
    assert np.load(centroids).shape[0] == 2 and notes.is_file()
    assert run_cli(args + ["--overwrite"], same_process=True).returncode == 0 and not leftovers(tmp_path)


def test_dedup_kept_names_collide_never(tmp_path, tiny_model):
    """x/a.txt, y/a.txt and 000-a.txt: three inputs whose numbered kept names used to collide; every input's kept
    lines land in a file of its own and mapping.tsv agrees with the kept files."""
    inputs = [tmp_path / "x" / "a.txt", tmp_path / "y" / "a.txt", tmp_path / "000-a.txt"]
    lines = {inputs[0]: ["x one", "x two"], inputs[1]: ["y one"], inputs[2]: ["z one", "z two", "z three"]}
    for path, texts in lines.items():
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(t + "\n" for t in texts))
    out = tmp_path / "kc"
    result = run_cli(["dedup", *inputs, "--model", tiny_model, "--out", out, "--quiet"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    names = kept_names(inputs)
    assert sorted(p.name for p in (out / "kept").iterdir()) == sorted(names) and len(set(names)) == 3
    mapping = [line.split("\t") for line in (out / "mapping.tsv").read_text().splitlines()[1:]]
    for path, name in zip(inputs, names):
        kept = [int(row[2]) for row in mapping if row[1] == str(path) and row[5] == "kept"]
        assert (out / "kept" / name).read_text().splitlines() == [lines[path][n - 1] for n in kept]


@given(st.lists(st.sampled_from(["a.txt", "A.txt", "000-a.txt", "001-a.txt", "000-1-a.txt", "b.jsonl", "é.txt",
                                 "e\u0301.txt"]), min_size=1, max_size=8))
def test_kept_names_are_unique_whatever_the_input_names(names):
    files = [Path(f"dir{i}") / name for i, name in enumerate(names)]
    kept = kept_names(files)
    folded = {__import__("unicodedata").normalize("NFC", name).casefold() for name in kept}
    assert len(folded) == len(files)
    assert all(name.endswith(path.name) for name, path in zip(kept, files))


# the property: over generated output paths around a model folder, an input file and a link to the folder,
# check_writable refuses exactly the outputs that are, hold or lie inside an input (by where the bytes would go)
PARTS = st.lists(st.sampled_from(["m", "link", "t.txt", "sub", "new.npy", "..", "embeddings.npy", "out"]),
                 min_size=1, max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=PARTS, overwrite=st.booleans())
def test_an_output_is_refused_exactly_when_it_meets_an_input(tmp_path, parts, overwrite):
    root = tmp_path / "w"
    if not root.exists():
        write_tiny_model(root / "m")
        (root / "t.txt").write_text(TEXTS)
        (root / "link").symlink_to(root / "m", target_is_directory=True)
    before = snapshot(root)
    out = root.joinpath(*parts)
    if out.name in ("", ".", ".."):
        return
    inputs = [root / "m", root / "t.txt"]
    written = out.parent.resolve() / out.name
    sources = [path.resolve() for path in inputs]
    meets = any(written == s or s.is_relative_to(written) or written.is_relative_to(s) for s in sources)
    try:
        check_writable(out, overwrite, inputs, folder=False)
        refusal = None
    except OutputExistsError as exc:
        refusal = str(exc)
    if meets:
        assert refusal and "an input of this command" in refusal, (out, refusal)
    elif refusal:
        assert "an input" not in refusal and (out.exists() or out.is_symlink()), (out, refusal)
    assert snapshot(root) == before
