"""`swembed encode`: a text file (one text per line) to an .npy matrix, with a rule for lines that are not UTF-8."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ERRORS = ("replace", "skip", "strict")


def read_texts(path: str, errors: str = "replace") -> tuple[list[str], list[int]]:
    """The lines of ``path`` ('-': stdin) and the 1-based numbers of the lines that are not valid UTF-8:
    decoded with U+FFFD (``replace``), left out (``skip``), or an error naming the first (``strict``)."""
    if errors not in ERRORS:
        raise ValueError(f"--errors must be one of {ERRORS}, got {errors!r}")
    raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    texts, bad = [], []
    for number, line in enumerate(lines, 1):
        line = line.removesuffix(b"\r")
        try:
            texts.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad.append(number)
            if errors == "strict":
                raise ValueError(f"{path}:{number}: not valid UTF-8 ({exc.reason} at byte {exc.start}); "
                                 "use --errors replace or skip") from None
            if errors == "replace":
                texts.append(line.decode("utf-8", errors="replace"))
    return texts, bad


def encode_file(model_path: str, input_path: str, output: str, errors: str = "replace",
                overwrite: bool = False) -> str:
    """Encode every line of ``input_path`` into ``output`` (.npy, float32, written atomically); returns a summary."""
    from swembed.runtime.embedder import load
    from swembed.runtime.outputs import atomic_file, check_writable

    read = [input_path, model_path]
    check_writable(Path(output), overwrite, read, folder=False)
    model = load(model_path)
    texts, bad = read_texts(input_path, errors)
    vectors = model.encode(texts)
    with atomic_file(Path(output), overwrite, read) as tmp, open(tmp, "wb") as handle:
        np.save(handle, vectors.astype(np.float32))
    note = f"; {len(bad)} lines not UTF-8 ({'skipped' if errors == 'skip' else 'decoded with U+FFFD'})" if bad else ""
    return f"{len(texts)} texts -> {output} {vectors.shape}{note}"
