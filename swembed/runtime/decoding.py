"""How a text file's bytes become text, never silently changed: a byte-order mark names the encoding (UTF-8,
UTF-16 or UTF-32, little or big endian) and is decoded as such; otherwise the file is UTF-8 unless ``--encoding
NAME`` says what it is. A line that does not decode is refused naming the file and line (``strict``), or decoded
with U+FFFD and counted (``replace``; ``swembed encode`` also has ``skip``), and the count is reported.

``LineReader`` streams a binary file's lines with their raw bytes (their line endings included, so a kept line is
written back byte for byte), their text and their 1-based numbers, whatever the encoding: files whose encoding
keeps ``\\n`` as that byte are split on it; UTF-16/32 are split on the decoded text and each line's raw bytes are
its encoded form (the mark on the first).
"""
from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

# Longest first: UTF-32 LE's mark begins with UTF-16 LE's.
BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
POLICIES = ("strict", "replace")  # what a line that does not decode gets (encode also skips it)
_CHUNK = 1 << 16
_ESCAPED = re.compile("[\udc00-\udcff]+")  # bytes that did not decode, kept by ``_BYTES`` (U+DC00 + byte)
_BYTES = "swembed-bytes"


def _keep_bytes(exc: UnicodeError) -> tuple[str, int]:
    """A codec error handler: bytes that do not decode become U+DC00 + byte (as ``surrogateescape`` does, for
    every byte and every codec: UTF-16's decoder refuses it for a NUL half); ``_encoded`` turns them back."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    return "".join(chr(0xDC00 + byte) for byte in exc.object[exc.start : exc.end]), exc.end


def _encoded(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding``, its ``_keep_bytes`` characters as the bytes they stand for."""
    parts = _ESCAPED.split(text)
    kept = _ESCAPED.findall(text)
    out = [parts[0].encode(encoding)]
    for escaped, part in zip(kept, parts[1:]):
        out += [bytes(ord(ch) - 0xDC00 for ch in escaped), part.encode(encoding)]
    return b"".join(out)


codecs.register_error(_BYTES, _keep_bytes)


def display_path(path: Path | str) -> str:
    """A file name as a message shows it: undecodable bytes of a name that is not UTF-8 as ``\\xNN``."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def check_encoding(name: str | None) -> str | None:
    """``name`` as Python's codec calls it (``latin-1`` -> ``iso8859-1``), or None; refuses an unknown name and a
    codec that is not for text (``rot13``, ``zlib``)."""
    if name is None:
        return None
    try:
        info = codecs.lookup(name)
    except LookupError:
        raise ValueError(f"--encoding {name!r}: not an encoding Python knows (e.g. utf-8, latin-1, cp1251, "
                         "utf-16)") from None
    if not getattr(info, "_is_text_encoding", True):
        raise ValueError(f"--encoding {name!r}: not a text encoding")
    return info.name


def byte_order_mark(head: bytes) -> tuple[str, int] | None:
    """The encoding a byte-order mark at the start of ``head`` names and the mark's length, or None."""
    for mark, encoding in BOMS:
        if head.startswith(mark):
            return encoding, len(mark)
    return None


def file_encoding(head: bytes, encoding: str | None = None) -> tuple[str, int]:
    """(encoding, bytes of mark to skip) of a file starting with ``head``: its byte-order mark's when ``encoding``
    is None or a UTF (a UTF-16 mark in a file said to be UTF-16 names its byte order), else ``encoding`` (default
    UTF-8)."""
    name = check_encoding(encoding)
    marked = byte_order_mark(head)
    if marked is not None and (name is None or name.startswith("utf")):
        return marked
    return name or "utf-8", 0


def splits_on_newline_byte(encoding: str) -> bool:
    """Whether ``encoding`` writes a line break as the byte ``\\n`` and never uses that byte otherwise (UTF-8, the
    ISO and Windows code pages; not UTF-16/32)."""
    return "\n".encode(encoding) == b"\n" and "a".encode(encoding) == b"a"


def head_text(head: bytes, encoding: str | None = None) -> str | None:
    """The start of a file as text when its mark or ``encoding`` names a codec other than UTF-8 (to judge whether it
    is text), else None (judged as UTF-8 bytes)."""
    name, skip = file_encoding(head, encoding)
    if name == "utf-8" and encoding is None:
        return None
    return codecs.getincrementaldecoder(name)(errors="replace").decode(head[skip:])


@dataclass
class Decoded:
    """How a file's lines were decoded: the encoding and the 1-based numbers of the lines that did not decode."""

    encoding: str = "utf-8"
    bad_lines: list[int] = field(default_factory=list)


def label(encoding: str) -> str:
    """An encoding as messages name it: ``UTF-8``, ``UTF-16-LE``, ``iso8859-1``."""
    return encoding.upper() if encoding.startswith("utf") else encoding


def refusal(path: Path | str, number: int, encoding: str, exc: UnicodeDecodeError) -> str:
    """The one line for a line that is not valid ``encoding``."""
    return (f"{display_path(path)}:{number}: not valid {label(encoding)} ({exc.reason} at byte {exc.start}); give "
            "its encoding with --encoding NAME (e.g. latin-1, cp1251) or use --errors replace")


def decode_line(raw: bytes, path: Path | str, number: int, decoded: Decoded, errors: str = "strict") -> str:
    """One line's bytes (no line ending, no mark) as text in ``decoded.encoding``; a line that does not decode is
    refused (``strict``) or decoded with U+FFFD and its number added to ``decoded.bad_lines`` (``replace``)."""
    try:
        return raw.decode(decoded.encoding)
    except UnicodeDecodeError as exc:
        if errors == "strict":
            raise ValueError(refusal(path, number, decoded.encoding, exc)) from None
        decoded.bad_lines.append(number)
        return raw.decode(decoded.encoding, errors="replace")


class LineReader:
    """The lines of an open binary file as (number, raw bytes with line ending, text without it); a line that does
    not decode is refused (``strict``) or decoded with U+FFFD and its number kept in ``decoded.bad_lines``. Text
    never holds the byte-order mark; the raw first line does."""

    def __init__(self, handle: BinaryIO, path: Path | str, encoding: str | None = None, errors: str = "strict"):
        self.handle: Any = handle if hasattr(handle, "peek") else io.BufferedReader(handle)  # type: ignore[type-var]
        self.path, self.errors = path, errors
        head = self.handle.peek(4)[:4]
        name, self.skip = file_encoding(head, encoding)
        self.decoded = Decoded(name)

    def _text(self, number: int, raw: bytes) -> str:
        return decode_line(raw, self.path, number, self.decoded, self.errors)

    def __iter__(self) -> Iterator[tuple[int, bytes, str]]:
        if splits_on_newline_byte(self.decoded.encoding):
            yield from self._byte_lines()
        else:
            yield from self._wide_lines()

    def _byte_lines(self) -> Iterator[tuple[int, bytes, str]]:
        for number, line in enumerate(self.handle, 1):
            body = strip_newline(line)
            yield number, line, self._text(number, body[self.skip:] if number == 1 else body)

    def _wide_lines(self) -> Iterator[tuple[int, bytes, str]]:
        """UTF-16/32: decoded a chunk at a time and split on ``\\n``; a line's raw bytes are its encoded form (bytes
        that do not decode kept through ``surrogateescape``, so they too are written back as they were)."""
        name = self.decoded.encoding
        decoder = codecs.getincrementaldecoder(name)(errors=_BYTES)
        raw_start, pending, number, done = self.handle.read(self.skip), "", 0, False
        while not done:
            chunk = self.handle.read(_CHUNK)
            done = not chunk
            pending += decoder.decode(chunk, final=done)
            *lines, pending = pending.split("\n")
            if done and pending:
                lines.append(pending)
            for index, line in enumerate(lines):
                number += 1
                ending = "" if done and pending and index == len(lines) - 1 else "\n"
                raw = raw_start + _encoded(line + ending, name)
                raw_start = b""
                yield number, raw, self._wide_text(number, line.removesuffix("\r"))

    def _wide_text(self, number: int, line: str) -> str:
        bad = _ESCAPED.search(line)
        if bad is None:
            return line
        if self.errors == "strict":
            exc = UnicodeDecodeError(self.decoded.encoding, b"", bad.start(), bad.start() + 1, "invalid data")
            raise ValueError(refusal(self.path, number, self.decoded.encoding, exc)) from None
        self.decoded.bad_lines.append(number)
        return _ESCAPED.sub("\ufffd", line)


def strip_newline(line: bytes) -> bytes:
    """A line without its ``\\n`` or ``\\r\\n``."""
    return line[:-2] if line.endswith(b"\r\n") else line[:-1] if line.endswith(b"\n") else line
