"""``swembed.build``: the Python face of ``swembed build``. It makes the same ``BuildConfig`` the CLI makes (from a
recipe, then the arguments on top), runs the same pipeline and returns the model."""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import fields
from pathlib import Path

from swembed.pipeline.config import SECTIONS, BuildConfig, BuildError, make_build_config
from swembed.runtime import StaticEmbedder

SOURCE = "swembed.build()"


def _section_fields() -> dict[str, list[str]]:
    """Each field name of a section -> the sections that have it."""
    owners: dict[str, list[str]] = {}
    for section in SECTIONS:
        for f in fields(getattr(BuildConfig(), section)):
            owners.setdefault(f.name, []).append(section)
    return owners


def settings_from(overrides: dict) -> dict:
    """Keyword arguments as a recipe-shaped dict: a section name takes a dict (``distill={"max_steps": 60}``), a
    top-level setting its value (``seed=1``), and a field that only one section has may be given alone
    (``max_steps=60``); a field several sections share must go through its section."""
    top = {f.name for f in fields(BuildConfig)} - set(SECTIONS)
    owners = _section_fields()
    settings: dict = {}
    for key, value in overrides.items():
        if key in SECTIONS or key in top:
            target = settings.setdefault(key, {}) if key in SECTIONS and isinstance(value, dict) else None
            if target is None:
                settings[key] = value
            else:
                target.update(value)
        elif len(owners.get(key, [])) == 1:
            settings.setdefault(owners[key][0], {})[key] = value
        elif key in owners:
            choices = " or ".join(f"{section}={{{key!r}: ...}}" for section in owners[key])
            raise BuildError(f"{SOURCE}: {key} is a setting of several sections; give it as {choices}")
        else:
            raise BuildError(f"{SOURCE}: unknown setting {key!r} (a top-level setting, a section name with a dict, "
                             "or a field of one section)")
    return settings


def make_config(teacher: str | None = None, corpus: str | Path | list | dict | None = None, dim: int | None = None,
                out: str | Path | None = None, recipe: str | Path | BuildConfig | None = None,
                **overrides) -> BuildConfig:
    """The ``BuildConfig`` that ``build`` runs: the recipe's (or the defaults), then the arguments on top, every
    value checked as the CLI checks it (``make_build_config``)."""
    given = {"teacher": teacher, "out": None if out is None else str(out)}
    settings = {key: value for key, value in given.items() if value is not None}
    if isinstance(corpus, dict):  # the [corpus] section itself
        settings["corpus"] = dict(corpus)
    elif corpus is not None:
        sources = [corpus] if isinstance(corpus, (str, Path)) else list(corpus)
        settings["corpus"] = {"sources": [str(source) for source in sources]}
    if dim is not None:
        settings["pca"] = {"dim": dim}
    for section, values in settings_from(overrides).items():
        if isinstance(values, dict) and isinstance(settings.get(section), dict):
            settings[section] = {**settings[section], **values}
        else:
            settings[section] = values
    return make_build_config(recipe, settings, SOURCE)


def build(teacher: str | None = None, corpus: str | Path | list | dict | None = None, dim: int | None = None,
          out: str | Path | None = None, recipe: str | Path | BuildConfig | None = None, *, overwrite: bool = False,
          force: bool = False, quiet: bool = True, **overrides) -> StaticEmbedder:
    """Build a static table and return it (see ``swembed.build``). ``out=None``: built in a temporary folder
    (the stage cache too, unless the recipe names a ``work_dir``), removed once the model is in memory."""
    config = make_config(teacher, corpus, dim, out, recipe, **overrides)  # bad settings fail before any work
    from swembed.pipeline.build import build as run_build

    if out is not None:
        config.check_inputs(overwrite)
        run_build(config, force=force, quiet=quiet, overwrite=overwrite, checked=True)
        return StaticEmbedder.load(config.out)
    scratch = Path(tempfile.mkdtemp(prefix="swembed-build-"))
    try:
        config.out = str(scratch / "model")
        config.check_inputs()
        run_build(config, force=force, quiet=quiet, checked=True)
        return StaticEmbedder.load(config.out, mmap=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
