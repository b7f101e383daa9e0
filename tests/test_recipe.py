"""The typed recipe shared by the CLI and ``swembed.build``: every numeric setting checked in one place, before any
work (issue 49: values that were accepted and lost data or crashed late), legacy keys mapped, unknown keys refused.
No teacher is loaded here."""
from __future__ import annotations

import logging
import math
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import run_cli, small_build_args

import swembed
from swembed.pipeline.config import (
    LEGACY_DISTILL_KEYS,
    RANGES,
    SECTIONS,
    BuildConfig,
    BuildError,
    OptionError,
    apply_settings,
    key_label,
    load_recipe,
)

# (flag, value, the one line the CLI prints after "swembed build: error: ", the recipe key swembed.build names)
ISSUE_49 = [
    ("--encode-sentences", "-1", "--encode-sentences must be at least 1 (leave it out for every sentence), got -1",
     "[extract] max_sentences"),
    ("--max-sentences", "0", "--max-sentences must be at least 1 (leave it out for no limit), got 0",
     "[corpus] max_sentences"),
    ("--kd-sentences", "-1", "--kd-sentences must be at least 1 (leave it out for every encoded sentence), got -1",
     "[distill] max_sentences"),
    ("--kd-sentences", "0", "--kd-sentences must be at least 1 (leave it out for every encoded sentence), got 0",
     "[distill] max_sentences"),
    ("--kd-weight", "inf", "--kd-weight must be a finite number at least 0, got inf", "[distill] kd_weight"),
    ("--piece-prior", "nan", "--piece-prior must be a finite number at least 0, got nan", "[compose] piece_prior"),
    ("--checkpoint-seconds", "-1", "--checkpoint-seconds must be at least 0, got -1.0", "checkpoint_seconds"),
    ("--checkpoint-seconds", "nan", "--checkpoint-seconds must be a finite number at least 0, got nan",
     "checkpoint_seconds"),
]


@pytest.mark.parametrize("flag,value,message,key", ISSUE_49, ids=[f"{f} {v}" for f, v, *_ in ISSUE_49])
def test_out_of_range_build_flags_are_refused_in_one_line_before_any_work(tmp_path, tiny_corpus, flag, value,
                                                                         message, key):
    out = tmp_path / "model"
    result = run_cli([*small_build_args(tiny_corpus, out), flag, value], same_process=True)
    assert result.returncode == 2
    assert result.stderr == f"swembed build: error: {message}\n"
    assert not out.exists() and not (tmp_path / "model.work").exists()


@pytest.mark.parametrize("flag,value,message,key", ISSUE_49, ids=[f"{f} {v}" for f, v, *_ in ISSUE_49])
def test_the_same_values_through_swembed_build_raise_one_value_error(tmp_path, tiny_corpus, flag, value, message,
                                                                     key):
    section, _, name = key.strip("[").partition("] ") if key.startswith("[") else ("", "", key)
    number = float(value) if "." in value or value in ("inf", "nan") or name == "checkpoint_seconds" else int(value)
    override = {section: {name: number}} if section else {name: number}
    if section == "corpus":
        override["corpus"]["sources"] = [str(tiny_corpus)]
    else:
        override["corpus"] = tiny_corpus
    with pytest.raises(ValueError) as caught:
        swembed.build(out=tmp_path / "model", **override)
    assert str(caught.value) == f"swembed.build(): {message.replace(flag, key)}"
    assert isinstance(caught.value, OptionError) and not (tmp_path / "model").exists()


def test_kd_sentences_zero_is_refused_before_torch_is_imported(tmp_path, tiny_corpus):
    """It used to end in a ZeroDivisionError traceback after extraction (24 s of work)."""
    code = ("import sys; from swembed.cli import main\n"
            f"rc = main({[*small_build_args(tiny_corpus, tmp_path / 'model'), '--kd-sentences', '0']!r})\n"
            "print('torch imported:', 'torch' in sys.modules); sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2 and result.stdout == "torch imported: False\n"
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def _numeric(annotation: str) -> bool:
    return bool({"int", "float"} & {kind.strip() for kind in annotation.split("|")})


def test_every_numeric_setting_has_a_range_and_the_defaults_lie_in_it():
    config = BuildConfig()
    holders = {"": config, **{name: getattr(config, name) for name in SECTIONS}}
    numeric = {f"{prefix}.{f.name}".lstrip(".") for prefix, holder in holders.items() for f in fields(holder)
               if _numeric(str(f.type)) and not (prefix == "coteacher")}  # co-teacher weights: BuildConfig.validate
    assert numeric == set(RANGES)
    config.validate()
    types = {f"{prefix}.{f.name}".lstrip("."): str(f.type)
             for prefix, holder in holders.items() for f in fields(holder)}
    for key, allowed in RANGES.items():
        bad = [int(allowed.low) - 1]
        if "float" in types[key]:
            bad += [math.nan, math.inf, -math.inf, *([allowed.low] if allowed.above else [])]
        if allowed.high is not None:
            bad.append(allowed.high + 1)
        section, _, name = key.rpartition(".")
        for value in bad:
            with pytest.raises(OptionError, match=re.escape(f"r.toml: {key_label(key)} must be ")) as caught:
                apply_settings(BuildConfig(), {section: {name: value}} if section else {name: value}, "r.toml")
            assert str(allowed) in str(caught.value) and "\n" not in str(caught.value)


def test_recipes_name_the_file_and_key_and_keep_their_older_keys(tmp_path, caplog):
    recipe = tmp_path / "r.toml"
    recipe.write_text("[distill]\nkd_weight = -1.0\n")
    with pytest.raises(BuildError, match=re.escape(f"{recipe}: [distill] kd_weight must be at least 0, got -1.0")):
        load_recipe(recipe)
    recipe.write_text("[distill]\nmax_step = 5\n")
    with pytest.raises(BuildError, match=re.escape(f"{recipe}: unknown key in [distill]: max_step")):
        load_recipe(recipe)
    recipe.write_text("[distill]\nshrinkage = 2.0\nalone_shrinkage = 4.0\ngram_buckets = 64\nco_teacher = 'mpnet'\n"
                      "co_teacher_weight = 0.2\nlr = 0.5\n")
    caplog.clear()
    config = load_recipe(recipe)
    assert (config.shrinkage.k, config.alone.k, config.grams.buckets, config.coteacher.pairs(), config.distill.lr) == (
        2.0, 4.0, 64, [("mpnet", 0.2)], 0.5)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [f"{recipe}: [distill] {old} is an older key; write [{section}] {name}"
                      for old, (section, name) in LEGACY_DISTILL_KEYS.items()]  # one line each
    recipe.write_text("[distill]\nshrinkage = 2.0\n[shrinkage]\nk = 3.0\n")
    with pytest.raises(BuildError, match=re.escape("[distill] shrinkage and [shrinkage] k are the same setting")):
        load_recipe(recipe)
    child = tmp_path / "child.toml"
    recipe.write_text("[distill]\nshrinkage = 2.0\nalone_shrinkage = 4.0\n")
    child.write_text('base = "r.toml"\n[shrinkage]\nk = 3.0\n')  # the new section replaces the base's old key
    assert (load_recipe(child).shrinkage.k, load_recipe(child).alone.k) == (3.0, 4.0)


def test_swembed_build_takes_sections_top_level_settings_and_unambiguous_fields(tmp_path):
    from swembed.pipeline.api import make_config

    config = make_config(corpus=tmp_path / "c.txt", dim=64, out=tmp_path / "m", max_steps=60, seed=3,
                         pca={"sentences": 300}, shrinkage={"k": 1.0}, distill={"eval_every": 20})
    assert (config.corpus.sources, config.pca.dim, config.pca.sentences, config.distill.max_steps, config.seed,
            config.shrinkage.k, config.distill.eval_every) == ([str(tmp_path / "c.txt")], 64, 300, 60, 3, 1.0, 20)
    recipe = tmp_path / "r.toml"
    recipe.write_text('teacher = "mpnet"\n[pca]\ndim = 128\n')
    config = make_config(recipe=recipe, out=tmp_path / "m")
    assert (config.teacher, config.pca.dim) == ("mpnet", 128)  # arguments left out keep the recipe's values
    with pytest.raises(BuildError, match=re.escape("max_sentences is a setting of several sections; give it as "
                                                   "corpus={'max_sentences': ...} or extract=")):
        make_config(max_sentences=10)
    with pytest.raises(BuildError, match=re.escape("swembed.build(): unknown setting 'max_stepz'")):
        make_config(max_stepz=10)
    with pytest.raises(BuildError, match=re.escape("swembed.build(): [pca] dim must be int, got '8'")):
        make_config(dim="8")


def test_shipped_recipes_use_the_sections_not_the_older_keys(caplog):
    """Every recipe of pipelines/ and lab/pipelines/ loads without a warning about an older key."""
    root = Path(__file__).resolve().parents[1]
    recipes = [path for folder in ("pipelines", "lab/pipelines") for path in sorted((root / folder).glob("*.toml"))
               if not path.stem.startswith("edge-")]  # edge-*: `swembed shrink` recipes
    assert len(recipes) > 10
    caplog.set_level(logging.WARNING)
    for path in recipes:
        load_recipe(path)
    assert [r.getMessage() for r in caplog.records if "older key" in r.getMessage()] == []


def test_older_names_of_a_key_and_a_flag_set_the_new_one_with_one_warning(tmp_path, caplog, capsys):
    from swembed.cli import _parser, build_config

    recipe = tmp_path / "r.toml"
    recipe.write_text("[compose]\nshrinkage = 2.0\n")
    caplog.clear()
    assert load_recipe(recipe).compose.piece_prior == 2.0
    assert [r.getMessage() for r in caplog.records] == [f"{recipe}: [compose] shrinkage is an older key; write "
                                                        "[compose] piece_prior"]
    recipe.write_text("[compose]\nshrinkage = 2.0\npiece_prior = 1.0\n")
    with pytest.raises(BuildError, match=re.escape("[compose] shrinkage and [compose] piece_prior are the same")):
        load_recipe(recipe)
    args = _parser().parse_args(["build", "--shrinkage", "3"])
    assert build_config(args).compose.piece_prior == 3.0
    assert capsys.readouterr().err == "swembed build: warning: --shrinkage is an older name; write --piece-prior\n"


def test_settings_become_a_config_validated_once_on_the_cli_and_api_paths(tmp_path, tiny_corpus, monkeypatch):
    """Flags and swembed.build's arguments go through make_build_config: one validation of the whole config before
    the inputs are checked (here a missing corpus stops the build there, before any work)."""
    calls = []
    validate = BuildConfig.validate
    monkeypatch.setattr(BuildConfig, "validate", lambda self: calls.append(self) or validate(self))
    missing = tmp_path / "missing.txt"
    result = run_cli([*small_build_args(tiny_corpus, tmp_path / "m"), "--corpus", missing], same_process=True)
    assert result.returncode == 2 and result.stderr == f"swembed build: error: corpus path not found: {missing}\n"
    assert len(calls) == 1
    with pytest.raises(ValueError, match="corpus path not found"):  # a CorpusError
        swembed.build(corpus=missing, out=tmp_path / "m", max_steps=60)
    assert len(calls) == 2 and not (tmp_path / "m").exists()
