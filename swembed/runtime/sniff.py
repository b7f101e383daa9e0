"""Whether a file is text: what ``swembed encode``, ``build``'s corpus and the record readers refuse before reading
(NUL bytes, or too few printable characters at its start)."""
from __future__ import annotations

from pathlib import Path

SNIFF_BYTES = 1 << 16
MIN_PRINTABLE = 0.85


def check_text(path: Path | str, head: bytes, error: type[ValueError] = ValueError) -> None:
    """Reject what is not text (an executable, an image, a database passed as text): NUL bytes, or less
    than ``MIN_PRINTABLE`` of the first characters printable or whitespace."""
    if b"\x00" in head:
        raise error(f"{path}: contains NUL bytes; not a text file")
    sample = head.decode("utf-8", errors="replace")
    if sample:
        printable = sum(ch.isprintable() or ch.isspace() for ch in sample if ch != "\ufffd")
        share = printable / len(sample)
        if share < MIN_PRINTABLE:
            raise error(f"{path}: only {share:.0%} of its first characters are printable text; not a text file")
