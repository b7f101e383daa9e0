"""Tables on the Hugging Face Hub (issue 78): ``swembed push`` / ``push_to_hub`` then ``swembed.load("org/name")``,
against a local stand-in of the Hub's HTTP API (tests/hub_standin.py) that the real huggingface_hub client talks to
in a subprocess (``HF_ENDPOINT``, a temporary ``HF_HOME``). Never the network."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import run_cli, snapshot, write_tiny_model
from hub_standin import HubStandin
from test_card import write_sts

import swembed
from swembed.runtime.hub import CARD_FILE, looks_like_repo_id, shipped_files

TOKEN = "hf_standin_writer"
TEXTS = ["the cat sat on the mat", "a good dog", "goodness", "nothing known here"]


@pytest.fixture
def hub(tmp_path):
    with HubStandin(tmp_path / "hub") as standin:
        yield standin


def hub_env(hub: HubStandin, tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a subprocess that uses the stand-in, with its own cache and the writer's token."""
    return hub.env(tmp_path / "hf-home", HF_TOKEN=TOKEN, **extra)


def in_python(code: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                          cwd=cwd)


def load_from_hub(env: dict[str, str], repo: str, out: Path, revision: str | None = None) -> Path:
    """``swembed.load(repo, revision=...)`` in a subprocess: writes the vectors of ``TEXTS`` to ``out``, returns the
    folder it loaded."""
    code = (f"import json, numpy as np, swembed\nm = swembed.load({repo!r}, revision={revision!r})\n"
            f"np.save({str(out)!r}, m.encode({TEXTS!r}))\nprint(json.dumps(str(m.path)))")
    result = in_python(code, env)
    assert result.returncode == 0, result.stderr
    return Path(json.loads(result.stdout.splitlines()[-1]))


def test_push_then_load_gives_the_same_files_and_vectors(tmp_path, hub):
    table = write_tiny_model(tmp_path / "tiny")
    pushed = run_cli(["push", table, "me/tiny", "--commit-message", "first table"], env_extra=hub_env(hub, tmp_path))
    assert pushed.returncode == 0, pushed.stderr
    assert "me/tiny" in pushed.stdout and "/commit/" in pushed.stdout
    folder = load_from_hub(hub_env(hub, tmp_path), "me/tiny", tmp_path / "hub.npy")
    local = snapshot(table)
    shipped = {p.relative_to(table).as_posix() for p in shipped_files(table)}
    assert shipped == {name for name in local if not name.startswith(".")} and ".swembed-output.json" in local
    assert {name: (folder / name).read_bytes() for name in shipped} == {name: local[name] for name in shipped}
    assert np.array_equal(np.load(tmp_path / "hub.npy"), swembed.load(table).encode(TEXTS))
    repos = hub.server.repos
    on_hub = repos.files("model", "me/tiny", repos.meta("model", "me/tiny")["branches"]["main"])
    assert set(on_hub) == shipped | {CARD_FILE, ".gitattributes"}  # .gitattributes: the Hub's first commit
    assert all(token == TOKEN for method, _, token in hub.requests if method == "POST")


def test_push_to_hub_and_revision_pick_a_branch(tmp_path, hub):
    """``StaticEmbedder.push_to_hub`` (the same push underneath) to main and to a branch; ``revision=`` loads the
    branch's table, no revision main's."""
    first = write_tiny_model(tmp_path / "first")
    second = write_tiny_model(tmp_path / "second", dim=6)
    code = ("import swembed\nprint(swembed.load('first').push_to_hub('me/two'))\n"
            "print(swembed.load('second').push_to_hub('me/two', revision='dev', commit_message='a branch'))")
    result = in_python(code, hub_env(hub, tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    env = hub_env(hub, tmp_path)
    main = load_from_hub(env, "me/two", tmp_path / "main.npy")
    dev = load_from_hub(env, "me/two", tmp_path / "dev.npy", revision="dev")
    assert np.array_equal(np.load(tmp_path / "main.npy"), swembed.load(first).encode(TEXTS))
    assert np.array_equal(np.load(tmp_path / "dev.npy"), swembed.load(second).encode(TEXTS))
    assert (dev / "embeddings.npy").read_bytes() == (second / "embeddings.npy").read_bytes() != \
        (main / "embeddings.npy").read_bytes()
    repos = hub.server.repos
    card = (repos.tree("model", "me/two", repos.meta("model", "me/two")["branches"]["dev"]) / CARD_FILE).read_text()
    assert card.startswith("---\n") and 'swembed.load("me/two")' in card


def test_offline_mode_loads_from_the_cache(tmp_path, hub):
    table = write_tiny_model(tmp_path / "tiny")
    assert run_cli(["push", table, "me/cached"], env_extra=hub_env(hub, tmp_path)).returncode == 0
    online = load_from_hub(hub_env(hub, tmp_path), "me/cached", tmp_path / "online.npy")
    seen = len(hub.requests)
    offline = load_from_hub(hub_env(hub, tmp_path, HF_HUB_OFFLINE="1"), "me/cached", tmp_path / "offline.npy")
    assert offline == online and len(hub.requests) == seen  # not one request
    assert np.array_equal(np.load(tmp_path / "offline.npy"), np.load(tmp_path / "online.npy"))


def test_private_repo_needs_the_token(tmp_path, hub):
    table = write_tiny_model(tmp_path / "tiny")
    env = {**hub_env(hub, tmp_path), "HF_TOKEN": ""}
    (tmp_path / "in.txt").write_text("a cat\n")
    assert run_cli(["push", table, "me/secret", "--private", "--token", TOKEN], env_extra=env).returncode == 0
    refused = run_cli(["encode", "me/secret", "--input", tmp_path / "in.txt", "--output", tmp_path / "x.npy"],
                      env_extra=env)
    assert refused.returncode == 2 and "no model repo of that name on the Hub" in refused.stderr
    load_from_hub(hub_env(hub, tmp_path), "me/secret", tmp_path / "secret.npy")  # HF_TOKEN: the owner's


def test_commands_take_a_repo_id_and_a_local_folder_wins(tmp_path, hub):
    """``swembed encode``, ``export`` and ``eval`` read a repo id through the same loader; a local folder that
    happens to be spelled like a repo id is read as the folder, without a request."""
    table = write_tiny_model(tmp_path / "tiny")
    env = hub_env(hub, tmp_path)
    assert run_cli(["push", table, "me/cli"], env_extra=env).returncode == 0
    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n")
    encoded = run_cli(["encode", "me/cli", "--input", tmp_path / "in.txt", "--output", tmp_path / "hub.npy"],
                      env_extra=env)
    assert encoded.returncode == 0, encoded.stderr
    assert np.array_equal(np.load(tmp_path / "hub.npy"), swembed.load(table).encode(TEXTS))
    exported = run_cli(["export", "me/cli", "--format", "npy", "--out", tmp_path / "edge"], env_extra=env)
    assert exported.returncode == 0, exported.stderr
    evaluated = run_cli(["eval", "me/cli", "--data", write_sts(tmp_path / "eval")], env_extra=env)
    assert evaluated.returncode == 0 and evaluated.stdout.startswith("me/cli (swembed)"), evaluated.stderr
    write_tiny_model(tmp_path / "me" / "cli", dim=5)  # ./me/cli exists: it wins over the Hub
    seen = len(hub.requests)
    local = run_cli(["encode", "me/cli", "--input", "in.txt", "--output", "local.npy"], env_extra=env, cwd=tmp_path)
    assert local.returncode == 0 and np.load(tmp_path / "local.npy").shape == (len(TEXTS), 5)
    assert len(hub.requests) == seen


def test_repo_ids_are_told_from_paths():
    assert looks_like_repo_id("org/name") and looks_like_repo_id("sentence-transformers/all-MiniLM-L6-v2")
    for path in ("models/minilm-256/", "./org/name", "/abs/path", "a/b/c", "name", "org/na..me", "org--x/y", "../x"):
        assert not looks_like_repo_id(path), path


def test_the_standin_serves_dataset_files(tmp_path, hub):
    """``hf_hub_download(repo_type="dataset")`` through the stand-in, at a branch and at main (for the tests of
    hf://datasets/ sources)."""
    hub.add_files("dataset", "org/corpora", {"en/a.txt": b"first\n"})
    hub.add_files("dataset", "org/corpora", {"en/a.txt": b"second\n"}, branch="v2")
    code = ("from huggingface_hub import hf_hub_download as get\n"
            "print(open(get('org/corpora', 'en/a.txt', repo_type='dataset')).read().strip(),"
            " open(get('org/corpora', 'en/a.txt', repo_type='dataset', revision='v2')).read().strip())")
    result = in_python(code, hub_env(hub, tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["first", "second"]
