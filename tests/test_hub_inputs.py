"""Bad input of the Hub commands (issue 78): each test is a row of docs/what-happens-when.md (``@promise``), against
the local stand-in of the Hub (tests/hub_standin.py); never the network."""
from __future__ import annotations

import json
import socket

import pytest
from conftest import run_cli, snapshot, write_tiny_model
from hub_standin import HubStandin
from test_bad_input import error_line, promise, promised  # noqa: F401 - promised: a fixture
from test_hub import TOKEN, hub_env, in_python

import swembed
from swembed.runtime.hub import HubError


@pytest.fixture
def hub(tmp_path):
    with HubStandin(tmp_path / "hub") as standin:
        yield standin


def encode_args(tmp_path, model: str) -> list:
    (tmp_path / "in.txt").write_text("a cat\n")
    return ["encode", model, "--input", tmp_path / "in.txt", "--output", tmp_path / "out.npy"]


@promise("a model that is neither a local folder nor a repo on the Hub (`swembed encode org/typo ...`, "
         "`swembed.load(\"org/typo\")`)", "(before issue 78) `model folder not found`, the Hub never asked",
         "refused in one line naming the repo and the Hub asked; nothing written",
         "<repo>: no such local folder, and no model repo of that name on the Hub (<endpoint>); check the name, or "
         "set HF_TOKEN for a private repo",
         "<repo>: the Hub repo has no revision '<revision>' (a branch, tag or commit)")
def test_hub_repo_not_found(tmp_path, hub, promised):
    env = hub_env(hub, tmp_path)
    result = run_cli(encode_args(tmp_path, "me/typo"), env_extra=env)
    assert error_line(result, "encode", promised).startswith("me/typo: no such local folder")
    assert not (tmp_path / "out.npy").exists()
    assert run_cli(["push", write_tiny_model(tmp_path / "tiny"), "me/tiny"], env_extra=env).returncode == 0
    result = in_python("import swembed\nswembed.load('me/tiny', revision='nope')", env)
    assert result.returncode == 1 and result.stderr.splitlines()[-1] == (
        "swembed.runtime.hub.HubError: me/tiny: the Hub repo has no revision 'nope' (a branch, tag or commit)")


@promise("a Hub repo id while `HF_HUB_OFFLINE=1` and the table is not in the Hugging Face cache, or the Hub "
         "unreachable", "(before issue 78) no Hub support",
         "refused in one line saying how to fix it; nothing written",
         "<repo>: not in the Hugging Face cache (<cache>) and HF_HUB_OFFLINE is set; download it once online "
         "(HF_HUB_OFFLINE=0), or give a local folder",
         "<repo>: the Hub (<endpoint>) cannot be reached and the table is not in the Hugging Face cache (<reason>)")
def test_hub_offline_and_not_cached(tmp_path, hub, promised):
    result = run_cli(encode_args(tmp_path, "me/tiny"), env_extra=hub_env(hub, tmp_path, HF_HUB_OFFLINE="1"))
    message = error_line(result, "encode", promised)
    assert message.startswith("me/tiny: not in the Hugging Face cache") and not hub.requests
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = run_cli(encode_args(tmp_path, "me/tiny"),
                     env_extra={**hub_env(hub, tmp_path), "HF_ENDPOINT": f"http://127.0.0.1:{port}"})
    assert error_line(result, "encode", promised).startswith(f"me/tiny: the Hub (http://127.0.0.1:{port}) cannot")
    assert not (tmp_path / "out.npy").exists()


@promise("a Hub repo that holds a sentence-transformers or model2vec model, or no swembed table",
         "(before issue 78) no Hub support", "refused in one line saying what the repo holds and how to load it",
         "<repo> on the Hub is a sentence-transformers model, not a swembed table: load it with "
         "sentence_transformers.SentenceTransformer('<repo>')",
         "<repo> on the Hub is a model2vec model, not a swembed table: load it with "
         "model2vec.StaticModel.from_pretrained('<repo>'), or give it as model2vec:<folder> to swembed eval or "
         "ensemble",
         "<repo> on the Hub holds no swembed table (no config.json of format 'swe-static')")
def test_hub_repo_is_not_a_table(tmp_path, hub, promised):
    hub.add_files("model", "me/st", {"modules.json": b"[]", "config_sentence_transformers.json": b"{}",
                                      "config.json": b'{"architectures": ["BertModel"]}'})
    hub.add_files("model", "me/m2v", {"modules.json": b"[]", "model.safetensors": b"",
                                       "config.json": json.dumps({"model_type": "model2vec"}).encode()})
    hub.add_files("model", "me/empty", {"notes.txt": b"nothing here\n"})
    env = hub_env(hub, tmp_path)
    messages = [error_line(run_cli(encode_args(tmp_path, repo), env_extra=env), "encode", promised)
                for repo in ("me/st", "me/m2v", "me/empty")]
    assert [m.split(" on the Hub is ")[-1].split(",")[0] for m in messages[:2]] == [
        "a sentence-transformers model", "a model2vec model"]
    assert messages[2] == "me/empty on the Hub holds no swembed table (no config.json of format 'swe-static')"


@promise("`swembed push` of a folder holding a README.md, to a name that is not a repo id, without write access, "
         "or `swembed.load(folder, revision=...)`", "(before issue 78) no push",
         "refused in one line before anything is uploaded (the Hub's refusal: nothing committed)",
         "<folder>/README.md: a table folder holds no README.md of its own (the push writes the card); move it away, "
         "or read the card first with swembed card",
         "'<repo>' is not a Hub repo id: give org/name",
         "<repo>: the Hub (<endpoint>) refused the push: <status>: <the Hub's reason>",
         "<folder>: revision='<revision>' names a Hub revision, and <folder> is a local path, not a Hub repo id "
         "(org/name)")
def test_push_refused(tmp_path, hub, promised):
    table = write_tiny_model(tmp_path / "tiny")
    env = hub_env(hub, tmp_path)
    assert error_line(run_cli(["push", table, "not a repo"], env_extra=env), "push", promised) == \
        "'not a repo' is not a Hub repo id: give org/name"
    no_token = run_cli(["push", table, "me/tiny"], env_extra={**env, "HF_TOKEN": ""})
    assert error_line(no_token, "push", promised).startswith(f"me/tiny: the Hub ({hub.url}) refused the push: 401")
    (table / "README.md").write_text("my own card\n")
    before = snapshot(table)
    assert error_line(run_cli(["push", table, "me/tiny", "--token", TOKEN], env_extra=env), "push",
                      promised).startswith(f"{table / 'README.md'}: a table folder holds no README.md")
    assert snapshot(table) == before and not hub.server.repos.folder("model", "me/tiny").exists()
    with pytest.raises(HubError) as caught:
        swembed.load(table, revision="dev")
    assert promised.fits(str(caught.value))


@promise("`swembed card` / `swembed push --eval` with a file that is not a `swembed eval --json` result, or the "
         "scores of another kind of model", "(before issue 78) no cards",
         "refused in one line naming the file; nothing written",
         "<file>: not a swembed eval --json result (<reason>)",
         "<file>: the scores of a '<kind>' model (<model>), not of a swembed table")
def test_card_refuses_bad_eval_files(tmp_path, promised):
    table = write_tiny_model(tmp_path / "tiny")
    (tmp_path / "notes.json").write_text("not json")
    (tmp_path / "teacher.json").write_text(json.dumps({"model": "minilm", "kind": "teacher", "suite": "en",
                                                        "scores": {"STS12": 70.0}}))
    out = tmp_path / "README.md"
    first = error_line(run_cli(["card", table, "--eval", tmp_path / "notes.json", "--out", out]), "card", promised)
    assert first.startswith(f"{tmp_path / 'notes.json'}: not a swembed eval --json result (")
    assert error_line(run_cli(["card", table, "--eval", tmp_path / "teacher.json", "--out", out]), "card",
                      promised) == f"{tmp_path / 'teacher.json'}: the scores of a 'teacher' model (minilm), not of " \
                                   "a swembed table"
    assert not out.exists()
