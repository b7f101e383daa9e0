"""Each build setting is declared once (``swembed.runtime.settings.setting``): its range, choices, flag, help and
how it enters its stage's cache key; ``RANGES``, ``CHOICES``, the flags, validation and the stage keys are read from
the declarations."""
from __future__ import annotations

import ast
import re
from dataclasses import asdict, field, make_dataclass
from pathlib import Path

import pytest

from swembed.pipeline.config import (
    RANGES,
    BuildConfig,
    DistillConfig,
    OptionError,
    RetrievalConfig,
    apply_settings,
    build_flags,
    load_recipe,
    ranges_of,
)
from swembed.runtime.ranges import Range
from swembed.runtime.settings import Key, declaration, setting, stage_key, walk

ROOT = Path(__file__).resolve().parent.parent


def test_every_setting_says_how_it_enters_its_stage_key():
    undeclared = [key for key, item in walk(BuildConfig) if declaration(item) is None]
    assert undeclared == []
    Plain = make_dataclass("Plain", [("window", "int", field(default=3))])  # a setting added without a declaration
    with pytest.raises(TypeError, match="Plain.window is not declared with setting"):
        stage_key(Plain())


def test_no_range_is_written_twice():
    """Every ``Range(...)`` in the package is a setting's declaration (``within=``, or a named range a declaration
    names there) or an entry of another command's own ``*_RANGES`` table (shrink, dedup, serve), never a second copy
    of a build setting's range."""
    elsewhere = []
    for path in (ROOT / "swembed").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.keyword) and node.arg == "within"}
        named = {node.value.id for node in ast.walk(tree)  # a range shared by name: ``within=WEIGHTS``
                 if isinstance(node, ast.keyword) and node.arg == "within" and isinstance(node.value, ast.Name)}
        allowed |= {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id in named for t in node.targets)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_RANGES")
                                                    for t in node.targets) and isinstance(node.value, ast.Dict):
                assert not {ast.literal_eval(k) for k in node.value.keys if k is not None} & set(RANGES), path
                allowed |= {id(inner) for inner in ast.walk(node.value)}
        elsewhere += [f"{path.name}:{node.lineno}" for node in ast.walk(tree) if isinstance(node, ast.Call)
                      and getattr(node.func, "id", "") == "Range" and id(node) not in allowed]
    assert elsewhere == []
    assert RANGES == ranges_of(BuildConfig) and RANGES["pca.dim"] == Range(1)


class CountingRange(Range):
    checks: list = []

    def holds(self, value: object) -> bool:
        self.checks.append(value)
        return super().holds(value)


def test_dim_is_checked_once(tmp_path, monkeypatch):
    from swembed.cli import _parser, build_config

    counting = CountingRange(1)
    monkeypatch.setitem(RANGES, "pca.dim", counting)
    build_config(_parser().parse_args(["build", "--dim", "32"]))
    assert counting.checks == [32]
    recipe = tmp_path / "r.toml"
    recipe.write_text("[pca]\ndim = 48\n", encoding="utf-8")
    counting.checks.clear()
    assert build_config(_parser().parse_args(["build", "--recipe", str(recipe)])).pca.dim == 48
    assert counting.checks == [48]
    with pytest.raises(OptionError, match=re.escape("--dim must be at least 1, got 0")):
        build_config(_parser().parse_args(["build", "--dim", "0"]))


def test_a_new_numeric_setting_is_one_declaration():
    """A ``[distill] warmup_steps`` registered as one declared field: its range, flag, validation and cache key follow
    with no other change."""
    Warmup = make_dataclass("Warmup", [("warmup_steps", "int", setting(  # annotations are text here
        0, key=Key.UNLESS_DEFAULT, within=Range(0), flag=True, help="steps before the full step size"))],
        bases=(DistillConfig,))
    Build = make_dataclass("Build", [("distill", Warmup, field(default_factory=Warmup))], bases=(BuildConfig,))
    assert ranges_of(Build)["distill.warmup_steps"] == Range(0)
    flag = next(item for item in build_flags(Build) if item[1] == "distill.warmup_steps")
    assert flag[0] == "--warmup-steps" and flag[2]["type"] is int and "full step size" in flag[2]["help"]
    config = apply_settings(Build(), {"distill": {"warmup_steps": 20}}, "r.toml")
    config.validate()
    assert config.distill.warmup_steps == 20
    with pytest.raises(OptionError, match=re.escape("r.toml: [distill] warmup_steps must be at least 0, got -1")):
        apply_settings(Build(), {"distill": {"warmup_steps": -1}}, "r.toml")
    config.distill.warmup_steps = -2
    with pytest.raises(OptionError, match=re.escape("[distill] warmup_steps must be at least 0, got -2")):
        config.validate()
    assert stage_key(Warmup()) == stage_key(DistillConfig())  # off: every cache stays valid
    assert stage_key(Warmup(warmup_steps=20)) == {**stage_key(DistillConfig()), "warmup_steps": 20}


def _keys_before(config: BuildConfig) -> dict:
    """Each section's part of its stage key as the stages wrote it by hand before the declarations (asdict, then
    the options left out by name), the reference the derived keys must equal."""
    distill = asdict(config.distill)
    for option in ("center_targets", "rare_word_pieces", "random_batch_weight", "sources", "lr_decay"):
        if distill[option] in (False, 0, [], "none"):
            distill.pop(option)
    distill.pop("cell_draws")  # keyed by the distill stage, where cells are used (distill_identity)
    pca = asdict(config.pca)
    if not config.pca.sources:
        pca.pop("sources")
    extract = {k: v for k, v in asdict(config.extract).items() if k not in ("unit_sentences", "batch_tokens")}
    extract = {k: v for k, v in extract.items() if v or k not in ("fill_max_words", "fill_sources", "window")}
    compose = asdict(config.compose)
    compose["shrinkage"] = compose.pop("piece_prior")
    paragraphs, retrieval = config.paragraphs, config.retrieval
    return {"corpus": {k: v for k, v in asdict(config.corpus).items() if k != "sources"},
            "vocab": {k: v for k, v in asdict(config.vocab).items() if k != "word_lists"},
            "extract": extract, "compose": compose, "pca": pca, "distill": distill,
            "shrinkage": {"shrinkage": config.shrinkage.k}, "alone": {"alone_shrinkage": config.alone.k},
            "coteacher": {"co_teacher": config.coteacher.teachers, "co_teacher_weight": config.coteacher.weights},
            "paragraphs": {"paragraphs": paragraphs.count, "paragraph_sentences": paragraphs.sentences,
                           "paragraph_weight": paragraphs.weight,
                           **({"paragraph_query_weight": paragraphs.query_weight}
                              if paragraphs.query_weight > 0 else {})},
            "retrieval": {"retrieval_weight": retrieval.weight, "retrieval_loss": retrieval.loss,
                          **({"retrieval_max_pairs": retrieval.max_pairs} if retrieval.max_pairs else {}),
                          **({"retrieval_cell_size": retrieval.cell_size} if retrieval.cell_size else {}),
                          **({"retrieval_windows": retrieval.windows} if retrieval.windows else {})},
            "grams": {"buckets": config.grams.buckets}}


BUILD_RECIPES = [path for path in sorted((ROOT / "pipelines").glob("*.toml"))  # not swembed shrink's (a source)
                 if not re.search(r"^source\s*=", path.read_text(encoding="utf-8"), re.MULTILINE)]


@pytest.mark.parametrize("recipe", BUILD_RECIPES, ids=lambda p: p.stem)
def test_the_shipped_recipes_keep_their_stage_keys(recipe):
    config = load_recipe(recipe)
    variant = load_recipe(recipe)
    apply_settings(variant, {"distill": {"lr_decay": "cosine", "center_targets": True, "sources": ["a"]},
                             "pca": {"sources": ["a"]},
                             "extract": {"fill_max_words": 9, "fill_sources": ["a"], "window": 5},
                             "paragraphs": {"query_weight": 0.3}, "retrieval": {"max_pairs": 50}}, "variant")
    for built in (config, variant):
        derived = {name: stage_key(getattr(built, name)) for name in _keys_before(built)}
        assert derived == _keys_before(built)


def test_the_distill_key_names_the_cell_draws_only_where_cells_are_drawn():
    """``cell_draws`` changes a table only where cells are drawn ([distill] or [retrieval] cell_size), and "sampled"
    (what caches from before it ran) stays out of the key, so no other build's cache is invalidated."""
    from swembed.pipeline.distill import DistillInputs, distill_identity
    from swembed.pipeline.retrieval import RETRIEVAL

    def key(distill: DistillConfig, retrieval: RetrievalConfig | None = None) -> dict:
        inputs = DistillInputs(None, None, {}, {}, "",  # type: ignore[arg-type]  # what the key does not read
                               post=[(RETRIEVAL, retrieval)] if retrieval else [])
        return distill_identity(distill, inputs, seed=0)

    assert "cell_draws" not in key(DistillConfig())
    hashed = key(DistillConfig(cell_size=160))
    assert hashed["cell_draws"] == "hashed"
    assert key(DistillConfig(cell_size=160, cell_draws="sampled")) == {k: v for k, v in hashed.items()
                                                                        if k != "cell_draws"}
    assert key(DistillConfig(), RetrievalConfig(files=["p.tsv"], cell_size=512))["cell_draws"] == "hashed"
