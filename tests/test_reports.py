"""`swembed eval`, `python -m lab.bench` and `python -m lab.report` as a user runs them, on a hand-made evaluation
folder in the shared data's layout and a real (tiny) MiniLM build."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import make_sentences, run_cli, small_build_args

import swembed
from lab import report
from swembed.eval.sts import EN_SETS, evaluate_sts, load_pair_set, score_pair_set

pytestmark = pytest.mark.teacher


def _pairs(seed: int, n: int = 12) -> list[tuple[str, str, float]]:
    """Pairs of corpus-like sentences; gold = shared words, so a table that carries meaning ranks them."""
    a, b = make_sentences(n, seed), make_sentences(n, seed + 100)
    return [(x, y if i % 2 else x.replace("The", "A", 1), 5.0 if i % 2 == 0 else float(i % 5))
            for i, (x, y) in enumerate(zip(a, b))]


def write_eval_folder(root):
    """STS12..16 (SemEval files), STS-B test and dev (tab-separated), SICK (three annotated files)."""
    for k, name in enumerate(("sts12", "sts13", "sts14", "sts15", "sts16")):
        (root / name).mkdir(parents=True)
        rows = _pairs(k)
        (root / name / "STS.input.news.txt").write_text("\n".join(f"{x}\t{y}" for x, y, _ in rows) + "\n")
        (root / name / "STS.gs.news.txt").write_text("\n".join(str(g) for *_, g in rows) + "\n")
    (root / "stsb").mkdir()
    for split, seed in (("test", 10), ("dev", 11)):
        (root / "stsb" / f"sts-{split}.csv").write_text(
            "\n".join(f"main\tnews\t2012\t{i}\t{g}\t{x}\t{y}" for i, (x, y, g) in enumerate(_pairs(seed))) + "\n")
    (root / "sick").mkdir()
    for k, name in enumerate(("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")):
        rows = ["pair_ID\tsentence_A\tsentence_B\trelatedness_score"]
        rows += [f"{i}\t{x}\t{y}\t{g}" for i, (x, y, g) in enumerate(_pairs(20 + k, 6))]
        (root / "sick" / name).write_text("\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """models/minilm-256-shared (the name the reports look for) and data/eval."""
    root = tmp_path_factory.mktemp("reports")
    write_eval_folder(root / "data" / "eval")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(make_sentences(400)) + "\n")
    model = root / "models" / "minilm-256-shared"
    built = run_cli(small_build_args(corpus, model) + ["--work-dir", str(root / "work")], same_process=True)
    assert built.returncode == 0, built.stderr
    return root, model


def test_eval_prints_each_set_and_their_mean(workspace, tmp_path):
    root, model = workspace
    result = run_cli(["eval", model, "--data", root / "data" / "eval", "--json", tmp_path / "scores.json"])
    assert result.returncode == 0, result.stderr
    expected = evaluate_sts(swembed.load(model).encode, root / "data" / "eval")
    saved = json.loads((tmp_path / "scores.json").read_text())["scores"]
    for name in (*EN_SETS, "avg"):
        printed = float(re.search(rf"^\s+{re.escape(name)}\s+(-?[\d.]+)$", result.stdout, re.M).group(1))
        assert printed == pytest.approx(expected[name], abs=0.005) and saved[name] == pytest.approx(expected[name])


def test_bench_times_every_model_on_the_sts_b_sentences(workspace):
    root, model = workspace
    args = [model, "model2vec:/nonexistent", "--data", root / "data" / "eval", "--seconds", "0.2", "--cores", "1"]
    result = subprocess.run([sys.executable, "-m", "lab.bench", *map(str, args)], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("24 texts")  # 12 pairs of STS-B test
    ours = next(line for line in result.stdout.splitlines() if line.startswith(str(model)[:40]))
    assert float(ours.split()[1].replace(",", "")) > 0
    assert "/nonexistent" in result.stdout and "error:" in result.stdout  # a broken spec is a row, not a crash


def test_report_writes_the_english_and_robust_tables_from_the_builds(workspace, tmp_path):
    root, model = workspace
    out = tmp_path / "reports"
    code = report.main(["--only", "english,robust", "--data", root / "data", "--models", root / "models",
                        "--out", out])
    assert code == 0 and sorted(p.name for p in out.glob("*.md")) == ["english.md", "robust.md"]
    english = (out / "english.md").read_text()
    assert "<!-- generated: python -m lab.report --only english,robust" in english  # each report names its command
    assert report.check(out) == 0  # and --check finds it above each table
    row = next(line for line in english.splitlines() if line.startswith("| **swembed** minilm-256-shared"))
    cells = [c.strip().strip("*") for c in row.split("|")[2:11]]
    encode = swembed.load(model).encode
    expected = evaluate_sts(encode, root / "data" / "eval")
    assert [float(c) for c in cells[:8]] == pytest.approx([expected[n] for n in (*EN_SETS, "avg")], abs=0.005)
    dev = score_pair_set(encode, load_pair_set(root / "data" / "eval", "STSBenchmark-dev"))
    assert float(cells[8]) == pytest.approx(dev, abs=0.005)
    assert "| teacher all-MiniLM-L6-v2 |" in english and "| paper OURS(256)" in english
    assert not re.search(r"mpnet|me5", english)  # rows only for builds that exist
    robust = (out / "robust.md").read_text()
    assert re.search(r"^\| minilm-256-shared \| " + f"{expected['avg']:.2f}", robust, re.M)
    assert np.isfinite([float(x) for x in re.findall(r"[-+]?\d+\.\d+", robust)]).all()
