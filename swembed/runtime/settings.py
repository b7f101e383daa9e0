"""One declaration per setting: a dataclass field made by ``setting(...)`` carries its default, its range or
choices, its flag, its help text and how it enters its stage's cache key (``Key``). The build's ``RANGES``,
``CHOICES``, its flags, validation and the stages' cache keys are all read from these declarations
(``swembed.pipeline.config``), so a setting is named, ranged and keyed in one place.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from swembed.runtime.ranges import Range


class Key(str, Enum):
    """How a setting enters the cache key of the stage that reads it."""

    ALWAYS = "always"  # its value, under its name (or ``key_name``)
    UNLESS_DEFAULT = "unless default"  # only when not at its default (or ``keyless``), so caches from before it existed
    # stay valid
    BY_STAGE = "by its stage"  # the stage keys what it reads of it (a file's digest, the teacher that ran, the seed)
    NEVER = "never"  # changes no artifact (where output goes, checkpoint granularity, applied at export)


AT_DEFAULT = "<at default>"  # Setting.keyless: the setting's default


@dataclass(frozen=True)
class Setting:
    """What a setting's field declares besides its default (``setting`` makes one)."""

    key: Key
    within: Range | None = None
    choices: tuple[str, ...] = ()
    flag: str | bool | None = None  # its ``swembed build`` flag: True, the field's name (``--min-words``), or an alias
    help: str = ""
    metavar: str | None = None
    key_name: str | None = None  # the name it has in its stage's key, where that differs (what older caches hold)
    older_flags: tuple[str, ...] = ()  # earlier names of its flag, still accepted with a one-line warning
    flag_choices: tuple[str, ...] = ()  # choices of the flag only (``--device``: a recipe may also name cuda:N)
    # Key.UNLESS_DEFAULT: the value left out of the key, where the default has changed since the setting existed
    # (what the caches from before it were built with); AT_DEFAULT: the default
    keyless: Any = AT_DEFAULT


def setting(default: Any = MISSING, *, key: Key, factory: Callable[[], Any] | None = None, flag: str | bool = False,
            **declared: Any) -> Any:
    """A dataclass field declaring a setting (see ``Setting``). ``flag=True``: the flag is the field's own name
    (``--no-<name>`` for an on/off setting on by default); a string is an alias, the flag users already know."""
    meta = {"setting": Setting(key=key, flag=flag or None, **declared)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def declaration(item: Field) -> Setting | None:
    """The ``Setting`` a field declares, or None for a field made without ``setting``."""
    return item.metadata.get("setting")


def default_of(item: Field) -> Any:
    """A field's default value (a fresh one from its factory)."""
    return item.default_factory() if item.default is MISSING else item.default  # type: ignore[misc,operator]


def flag_name(item: Field) -> str | None:
    """The flag of a field's setting: its alias, or ``--<name>`` (``--no-<name>`` for an on/off setting on by
    default) when it declares ``flag=True``; None for a recipe-only setting."""
    meta = declaration(item)
    if meta is None or not meta.flag:
        return None
    if meta.flag is not True:
        return str(meta.flag)
    name = item.name.replace("_", "-")
    return f"--no-{name}" if default_of(item) is True else f"--{name}"


def walk(holder: type, prefix: str = "") -> Iterator[tuple[str, Field]]:
    """Every setting field of a config dataclass and of its sections (fields that are dataclasses themselves), by
    key: ``"seed"``, ``"pca.dim"``; a section's own field is not yielded, its settings are."""
    for item in fields(holder):
        value = default_of(item) if item.default is not MISSING or item.default_factory is not MISSING else None
        if is_dataclass(value):
            yield from walk(type(value), f"{prefix}{item.name}.")
        else:
            yield f"{prefix}{item.name}", item


def stage_key(section: object) -> dict:
    """What a config section puts into its stage's cache key: each setting declared ``Key.ALWAYS``, and each declared
    ``Key.UNLESS_DEFAULT`` that differs from its default, under its ``key_name`` or its own name (the stage adds
    what it reads of its ``Key.BY_STAGE`` settings)."""
    key = {}
    for item in fields(section):  # type: ignore[arg-type]
        meta = declaration(item)
        if meta is None:
            raise TypeError(f"{type(section).__name__}.{item.name} is not declared with setting(): say how it enters "
                            "its stage's cache key")
        value = getattr(section, item.name)
        keyless = default_of(item) if meta.keyless == AT_DEFAULT else meta.keyless
        if meta.key is Key.ALWAYS or (meta.key is Key.UNLESS_DEFAULT and value != keyless):
            key[meta.key_name or item.name] = value
    return key
