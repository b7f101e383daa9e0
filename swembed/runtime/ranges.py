"""The values a numeric setting takes, and the one way a value out of range is refused: ``<name> must be <range>,
got <value>``. The build's settings (``swembed.pipeline.config.RANGES``), ``swembed shrink``'s and ``swembed
dedup``'s all say it so; ``name`` is what the user wrote (a flag, a recipe key)."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """From ``low`` (``above``: excluding it) to ``high``, finite; ``unset`` says what leaving it out (None) means,
    where it may be left out."""

    low: float
    high: float | None = None
    above: bool = False
    unset: str = ""

    def holds(self, value: object) -> bool:
        if value is None:
            return bool(self.unset)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return True  # a wrong type is the type check's to report
        return (math.isfinite(value) and (value > self.low if self.above else value >= self.low)
                and (self.high is None or value <= self.high))

    def __str__(self) -> str:
        lowest = f"above {self.low:g}" if self.above else f"at least {self.low:g}"
        text = (f"{lowest} and at most {self.high:g}" if self.above and self.high is not None
                else f"between {self.low:g} and {self.high:g}" if self.high is not None else lowest)
        return text + (f" (leave it out for {self.unset})" if self.unset else "")

    def refusal(self, name: str, value: object) -> str:
        """The message refusing ``value`` for the setting the user wrote as ``name``."""
        finite = "a finite number " if isinstance(value, float) and not math.isfinite(value) else ""
        return f"{name} must be {finite}{self}, got {value!r}"


def check_ranges(ranges: Mapping[str, Range], settings: object, name: Callable[[str], str] = str) -> None:
    """Raise ``ValueError`` (``Range.refusal``) for the first field of ``settings`` (a dataclass) named in ``ranges``
    whose value is outside its range; ``name`` gives how the user writes the field (a flag, a recipe key)."""
    for field, allowed in ranges.items():
        value = getattr(settings, field)
        if not allowed.holds(value):
            raise ValueError(allowed.refusal(name(field), value))
