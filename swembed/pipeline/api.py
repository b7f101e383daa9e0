"""``swembed.build``: the Python face of ``swembed build``. It makes the same ``BuildConfig`` the CLI makes (from a
recipe, then the arguments on top), runs the same pipeline and returns the model. Arguments of the wrong type are
refused as ``BuildError`` (a ``ValueError``) in one line, as the CLI refuses its flags; SIGTERM unwinds a build as
it does the CLI's (``terminate_raises``), so its temporary folder is removed, and one a killed process left is swept
by the next run (``outputs.scratch_folder``)."""
from __future__ import annotations

import shutil
from dataclasses import fields
from pathlib import Path
from typing import Any

from swembed.pipeline.config import SECTIONS, BuildConfig, BuildError, make_build_config
from swembed.runtime import StaticEmbedder
from swembed.runtime.outputs import scratch_folder, terminate_raises
from swembed.runtime.testpoints import reached

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


def _check_types(**given: tuple) -> None:
    """Refuse an argument (value, allowed types) of another type in one line (None is always allowed)."""
    for name, (value, kinds) in given.items():
        kinds = kinds if isinstance(kinds, tuple) else (kinds,)
        if value is not None and (not isinstance(value, kinds) or isinstance(value, bool)):
            wanted = " or ".join("a path" if k is Path else "a BuildConfig" if k is BuildConfig else k.__name__
                                 for k in kinds)
            raise BuildError(f"{SOURCE}: {name} takes {wanted}, got {type(value).__name__} {value!r:.60}")


def make_config(teacher: str | None = None, corpus: str | Path | list | dict | None = None, dim: int | None = None,
                out: str | Path | None = None, recipe: str | Path | BuildConfig | None = None,
                **overrides) -> BuildConfig:
    """The ``BuildConfig`` that ``build`` runs: the recipe's (or the defaults), then the arguments on top, every
    value checked as the CLI checks it (``make_build_config``)."""
    _check_types(teacher=(teacher, str), out=(out, (str, Path)), recipe=(recipe, (str, Path, BuildConfig)),
                 corpus=(corpus, (str, Path, list, tuple, dict)))  # dim: its declaration checks it
    if isinstance(corpus, (list, tuple)) and not all(isinstance(source, (str, Path)) for source in corpus):
        raise BuildError(f"{SOURCE}: corpus takes paths (str or Path), got a list holding "
                         f"{next(type(x).__name__ for x in corpus if not isinstance(x, (str, Path)))}")
    given = {"teacher": teacher, "out": None if out is None else str(out)}
    settings: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
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
        with terminate_raises():
            run_build(config, force=force, quiet=quiet, overwrite=overwrite, checked=True)
        return StaticEmbedder.load(config.out)
    with terminate_raises():  # SIGTERM unwinds (the CLI's main does the same): the finally below runs
        scratch = scratch_folder("swembed-build")
        try:
            reached("build: scratch folder made")
            config.out = str(scratch / "model")
            config.check_inputs()
            run_build(config, force=force, quiet=quiet, checked=True)
            return StaticEmbedder.load(config.out, mmap=False)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
