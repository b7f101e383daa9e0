"""Byte-identity of builds across a refactor: eight small builds (real MiniLM teacher, seconds to a minute each on a
CPU), each into its own folder, recording the cache-folder names under its work folder and the sha256 of every table
file of its model folder. Run it once with the code before the change and once after, and compare::

    PYTHONPATH=/work/wt79-base python -m lab.identity_check run /tmp/ids/base.json --root /tmp/ids/base
    PYTHONPATH=/work/wt79 python -m lab.identity_check run /tmp/ids/new.json --root /tmp/ids/new
    python -m lab.identity_check compare /tmp/ids/base.json /tmp/ids/new.json

The builds run as ``python -m swembed.cli build`` in a subprocess with the caller's PYTHONPATH, so the code that
builds is the code on that path (the record names the ``swembed`` module file each one imported).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

TABLE_SUFFIXES = (".npy", ".npz", ".txt", ".json.gz", ".safetensors", ".bin")
NOUNS = ["cat", "dog", "mat", "house", "river", "tree", "car", "road", "book", "table", "city", "garden", "music",
         "teacher", "window", "market", "bridge", "forest", "ocean", "letter"]
ADJS = ["good", "old", "red", "quiet", "large", "small", "bright", "dark", "happy", "strange"]
VERBS = ["sees", "likes", "finds", "holds", "follows", "paints", "crosses", "reads"]


def sentences(n: int, seed: int) -> list[str]:
    """Simple English sentences (as tests/conftest.py's ``make_sentences``)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.sample(NOUNS, 2)
        line = f"The {rng.choice(ADJS)} {a} {rng.choice(VERBS)} the {rng.choice(ADJS)} {b}"
        out.append(line + (f" near the {rng.choice(NOUNS)}" if i % 3 == 0 else "") + f" number {i}.")
    return out


def write_inputs(root: Path) -> dict[str, Path]:
    """The corpus, a retrieval pair file and the recipes the builds read."""
    root.mkdir(parents=True, exist_ok=True)
    corpus, pairs = root / "corpus.txt", root / "pairs.tsv"
    corpus.write_text("\n".join(sentences(500, 0)) + "\n", encoding="utf-8")
    pairs.write_text("".join(f"{a.split(' number')[0]}\t{b}\n" for a, b in zip(sentences(400, 1), sentences(400, 2))),
                     encoding="utf-8")
    recipes = {
        "grams": "[grams]\nbuckets = 64\n",
        "shrink_alone": "[shrinkage]\nk = 2.0\n[alone]\nk = 1.0\n",
        "retrieval": f"[retrieval]\nfiles = [\"{pairs}\"]\nloss = \"contrastive\"\nweight = 0.5\n",
        "cover_fill": "[extract]\nsentences = \"cover\"\nsentences_per_word = 5\nmax_sentences = 350\n"
                      "fill_max_words = 12\n[distill]\nlr_decay = \"cosine\"\ncenter_targets = true\n",
        "coteacher": "[coteacher]\nteachers = \"minilm\"\nweights = 0.3\n[distill]\nrandom_batch_weight = 0.5\n"
                     "cell_size = 64\nrare_word_pieces = 2\n",
    }
    paths = {"corpus": corpus}
    for name, text in recipes.items():
        paths[name] = root / f"{name}.toml"
        paths[name].write_text(text, encoding="utf-8")
    return paths


def builds(paths: dict[str, Path]) -> dict[str, list[str]]:
    """Each build's flags beyond the small build's (tests/conftest.py's ``small_build_args``)."""
    return {
        "default": [],
        "no_distill": ["--no-distill"],
        "pieces_off": ["--no-pieces", "--backoff", "teacher_prefix", "--min-contexts", "2", "--piece-prior", "1.5"],
        "grams": ["--recipe", str(paths["grams"])],
        "shrinkage_alone": ["--recipe", str(paths["shrink_alone"])],
        "retrieval": ["--recipe", str(paths["retrieval"])],
        "cover_fill": ["--recipe", str(paths["cover_fill"]), "--dim", "24", "--seed", "3"],
        "coteacher": ["--recipe", str(paths["coteacher"])],
    }


def small_build(corpus: Path, out: Path, work: Path) -> list[str]:
    return ["build", "--teacher", "minilm", "--corpus", str(corpus), "--out", str(out), "--work-dir", str(work),
            "--dim", "32", "--pca-sentences", "300", "--distill-steps", "60", "--batch-tokens", "512", "--eval-every",
            "20", "--unit-sentences", "64", "--checkpoint-seconds", "0", "--no-teacher-words", "--quiet"]


def record(out: Path, work: Path) -> dict:
    """The cache-folder names under ``work`` and the sha256 of each table file under ``out``."""
    tables = {path.relative_to(out).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
              for path in sorted(out.rglob("*")) if path.is_file() and path.name.endswith(TABLE_SUFFIXES)}
    return {"cache_folders": sorted(p.name for p in work.iterdir() if p.is_dir()), "tables": tables}


def run(result: Path, root: Path, only: list[str]) -> None:
    root = root.resolve()
    paths = write_inputs(root)
    found = {"python_path": os.environ.get("PYTHONPATH", ""), "builds": {}}
    if result.is_file():  # a run stopped part way: its finished builds are kept
        found["builds"] = json.loads(result.read_text(encoding="utf-8"))["builds"]
    probe = subprocess.run([sys.executable, "-c", "import swembed; print(swembed.__file__)"], capture_output=True,
                           text=True, check=True, cwd=root)  # not the caller's folder, which may hold a swembed
    found["swembed"] = probe.stdout.strip()
    print("swembed from", found["swembed"], flush=True)
    for name, extra in builds(paths).items():
        if (only and name not in only) or name in found["builds"]:
            continue
        out, work = root / name, root / f"{name}.work"
        args = [sys.executable, "-m", "swembed.cli", *small_build(paths["corpus"], out, work), *extra]
        done = subprocess.run(args, capture_output=True, text=True, cwd=root)
        if done.returncode != 0:
            result.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
            raise SystemExit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
        found["builds"][name] = record(out, work)
        print(name, "done:", len(found["builds"][name]["tables"]), "table files,",
              len(found["builds"][name]["cache_folders"]), "cache folders", flush=True)
    result.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")


def compare(before: Path, after: Path) -> int:
    """0 when every build has the same cache-folder names and table digests; else prints each difference."""
    old, new = (json.loads(Path(p).read_text(encoding="utf-8"))["builds"] for p in (before, after))
    differences = [name for name in sorted(set(old) | set(new)) if old.get(name) != new.get(name)]
    for name in differences:
        print(f"{name}: differs\n  before {json.dumps(old.get(name))}\n  after  {json.dumps(new.get(name))}")
    print(f"{len(set(old) & set(new)) - len(differences)} of {len(set(old) | set(new))} builds identical")
    return 1 if differences else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run")
    p.add_argument("result", type=Path)
    p.add_argument("--root", type=Path, required=True, help="a new folder for the inputs and the builds")
    p.add_argument("--only", nargs="*", default=[], help="these builds only")
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.result, args.root, args.only)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
