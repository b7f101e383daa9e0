"""Whether a file is text: what ``swembed encode``, ``build``'s corpus and the record readers refuse before reading
(NUL bytes, or too few printable characters at its start)."""
from __future__ import annotations

from pathlib import Path

from swembed.runtime.decoding import head_text

SNIFF_BYTES = 1 << 16
MIN_PRINTABLE = 0.85


def check_text(path: Path | str, head: bytes, error: type[ValueError] = ValueError,
               encoding: str | None = None) -> None:
    """Reject what is not text (an executable, an image, a database passed as text): NUL bytes, or less
    than ``MIN_PRINTABLE`` of the first characters printable or whitespace. The head is read in the encoding its
    byte-order mark names (UTF-16/32 text holds NUL bytes) or ``encoding``; bytes that are not UTF-8 count neither
    way (text in another encoding is text: its lines are refused or decoded by ``swembed.runtime.decoding``)."""
    sample = head_text(head, encoding)
    if sample is None:
        if b"\x00" in head:
            raise error(f"{path}: contains NUL bytes; not a text file")
        sample = head.decode("utf-8", errors="replace")
    elif "\x00" in sample:
        raise error(f"{path}: contains NUL characters; not a text file")
    judged = [ch for ch in sample if ch != "\ufffd"]
    if judged:
        share = sum(ch.isprintable() or ch.isspace() for ch in judged) / len(judged)
        if share < MIN_PRINTABLE:
            raise error(f"{path}: only {share:.0%} of its first characters are printable text; not a text file")
