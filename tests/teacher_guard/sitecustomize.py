"""The teacher guard: a test without the ``teacher`` marker must not load a teacher by name (a registry short name or
hub id; a folder the test made itself, such as a tiny random model, is fine, and a name that is no teacher still
gives its own error). conftest applies ``forbid_teachers`` before each unmarked test's fixtures are set up, and
puts this folder first on PYTHONPATH with SWEMBED_TEST_NO_TEACHER=1 so that Python runs this file at start-up in
every subprocess the test starts (the CLI as a user runs it): the guard holds there too. Every way to a teacher's
weights (``load_teacher``, ``load_encoder``, a build, a co-teacher, ``lens-clusters``) goes through
``swembed.teachers.registry.resolve_teacher``, which the guard replaces, so ``pytest -m "not teacher"`` loads none."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from pathlib import Path

ENV = "SWEMBED_TEST_NO_TEACHER"
MODULE = "swembed.teachers.registry"


class TeacherLoadForbidden(RuntimeError):
    """Raised when a test without the ``teacher`` marker resolves a teacher."""


def forbidding(resolve, registry):
    """``resolve`` (registry.resolve_teacher), refusing a registry short name or hub id that is not a folder."""
    if getattr(resolve, "forbids_teachers", False):
        return resolve

    def guarded(name_or_path, *args, **kwargs):
        name = str(name_or_path)
        known = name in registry.TEACHERS or "/" in name or any(s.hub_id == name for s in registry.TEACHERS.values())
        if known and not Path(name).expanduser().is_dir():
            raise TeacherLoadForbidden(f"this test loads the teacher {name!r} but is not marked @pytest.mark.teacher")
        return resolve(name_or_path, *args, **kwargs)

    guarded.forbids_teachers = True
    return guarded


def forbid_teachers(registry) -> None:
    registry.resolve_teacher = forbidding(registry.resolve_teacher, registry)


class _GuardOnImport(importlib.abc.MetaPathFinder):
    """Applies ``forbid_teachers`` to the registry as soon as it is imported (before swembed.teachers re-exports it)."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def exec_and_guard(module):
                exec_module(module)
                forbid_teachers(module)

            spec.loader.exec_module = exec_and_guard
        return spec


if os.environ.get(ENV) == "1" and MODULE not in sys.modules:
    sys.meta_path.insert(0, _GuardOnImport())
