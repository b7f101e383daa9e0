"""Tables on the Hugging Face Hub: ``swembed.load("org/name")`` downloads one, ``push_table`` uploads one.

huggingface_hub (the ``hub`` extra; tokenizers already depends on it) is imported inside these functions only, so
the runtime still imports numpy and tokenizers alone. Its cache, ``HF_HUB_OFFLINE``, ``HF_ENDPOINT`` and
``HF_TOKEN`` apply as for any Hugging Face library. A download fetches only the files a table folder needs
(``TABLE_FILES``), plus the few small files that tell a sentence-transformers or model2vec repo apart.

The README.md card a push writes is made by ``swembed.integrations.card`` with the recipe sources' licences
(``swembed.pipeline.public_data``): floors above the runtime, so the package's front door (``swembed/__init__.py``)
installs the card maker here (``install_card_maker``); ``StaticEmbedder.push_to_hub``, ``swembed push``,
``swembed card`` and ``swembed export`` all make their card through ``model_card``.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from swembed.runtime.folder import (
    CONFIG_FILE,
    EMBEDDINGS_FILE,
    FORMAT_NAME,
    SCALES_FILE,
    TOKENIZER_FILE,
    VOCAB_FILE,
    ModelFolderError,
    read_model_folder,
)
from swembed.runtime.storage import CODES_FILE

CARD_FILE = "README.md"
TABLE_FILES = (CONFIG_FILE, VOCAB_FILE, EMBEDDINGS_FILE, SCALES_FILE, CODES_FILE, TOKENIZER_FILE,
               "word_contexts.npy")  # word_contexts: a multilingual table's language identification
SENTENCE_TRANSFORMERS_FILES = ("modules.json", "config_sentence_transformers.json")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")  # org/name, as the Hub spells them


class HubError(ValueError):
    """A table cannot be fetched from, or pushed to, the Hub."""


def looks_like_repo_id(text: str) -> bool:
    """Whether ``text`` is spelled like a Hub repo id (``org/name``): one slash, no ``..`` or ``--``."""
    return bool(_REPO_ID.fullmatch(text)) and ".." not in text and "--" not in text and not text.endswith(".git")


def local_or_hub(path: str | Path, revision: str | None = None) -> Path:
    """The local folder of a model: ``path`` itself when it exists, is a ``Path`` or is not spelled like a repo
    id; otherwise the repo's table from the Hub (``download_table``). ``revision`` is for repo ids only. An empty
    path (which would read the current folder) is refused."""
    if not isinstance(path, Path) and not str(path).strip():
        raise ModelFolderError(f"{path!r}: an empty path names no table (it would read the current folder); give a "
                               "table folder or a Hub repo id (org/name)")
    if isinstance(path, Path) or Path(path).exists() or not looks_like_repo_id(str(path)):
        if revision is not None:
            raise HubError(f"{path}: revision={revision!r} names a Hub revision, and {path} is a local path, not a "
                           "Hub repo id (org/name)")
        return Path(path)
    return download_table(str(path), revision)


def _hub():
    """huggingface_hub, or one line naming the extra that installs it."""
    from swembed._extras import require

    require("hub", "huggingface_hub")
    import huggingface_hub

    return huggingface_hub


def download_table(repo_id: str, revision: str | None = None) -> Path:
    """The snapshot folder of a swembed table on the Hub (``snapshot_download`` into huggingface_hub's cache;
    offline, the cached copy), checked to hold a table."""
    hub = _hub()
    from huggingface_hub import errors

    patterns = [*TABLE_FILES, *SENTENCE_TRANSFORMERS_FILES]
    snapshot_log = logging.getLogger("huggingface_hub._snapshot_download")  # "no files matched": said below instead
    level = snapshot_log.level
    snapshot_log.setLevel(logging.ERROR)
    try:
        folder = Path(hub.snapshot_download(repo_id, repo_type="model", revision=revision, allow_patterns=patterns))
    except errors.RevisionNotFoundError:
        raise HubError(f"{repo_id}: the Hub repo has no revision {revision!r} (a branch, tag or commit)") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"{repo_id}: no such local folder, and no model repo of that name on the Hub "
                       f"({hub.constants.ENDPOINT}); check the name, or set HF_TOKEN for a private repo") from None
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled) as exc:
        raise HubError(_not_cached(hub, repo_id, revision, exc)) from None
    except errors.HfHubHTTPError as exc:
        raise HubError(f"{repo_id}: the Hub ({hub.constants.ENDPOINT}) answered {_status(exc)}") from None
    finally:
        snapshot_log.setLevel(level)
    _check_table(folder, repo_id)
    return folder


def _not_cached(hub: Any, repo_id: str, revision: str | None, exc: Exception) -> str:
    where = f"{repo_id}" + (f" at {revision}" if revision else "")
    if hub.constants.HF_HUB_OFFLINE:
        return (f"{where}: not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) and HF_HUB_OFFLINE is set; "
                "download it once online (HF_HUB_OFFLINE=0), or give a local folder")
    reason = str(exc.__cause__ or exc).splitlines()[0][:200]
    return (f"{where}: the Hub ({hub.constants.ENDPOINT}) cannot be reached and the table is not in the Hugging "
            f"Face cache ({reason})")


def _status(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    return f"{code}: {str(exc).splitlines()[0][:200]}" if code else str(exc).splitlines()[0][:200]


def _check_table(folder: Path, repo_id: str) -> None:
    """A downloaded repo holds a swembed table; a sentence-transformers or model2vec repo is named as such."""
    import json

    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = None
    if isinstance(config, dict) and config.get("format") == FORMAT_NAME:
        return
    if isinstance(config, dict) and config.get("model_type") == "model2vec":
        raise HubError(f"{repo_id} on the Hub is a model2vec model, not a swembed table: load it with "
                       f"model2vec.StaticModel.from_pretrained('{repo_id}'), or give it as model2vec:<folder> to "
                       "swembed eval or ensemble")
    if any((folder / name).is_file() for name in SENTENCE_TRANSFORMERS_FILES):
        raise HubError(f"{repo_id} on the Hub is a sentence-transformers model, not a swembed table: load it with "
                       f"sentence_transformers.SentenceTransformer('{repo_id}')")
    raise HubError(f"{repo_id} on the Hub holds no swembed table (no {CONFIG_FILE} of format {FORMAT_NAME!r})")


# --- the card ---------------------------------------------------------------------------------------------------

CardMaker = Callable[..., str]
_card_makers: list[CardMaker] = []


def install_card_maker(maker: CardMaker) -> None:
    """Set the function ``model_card`` calls (the package's front door installs swembed's own)."""
    _card_makers[:] = [maker]


def model_card(table: str | Path | None, *, files: Path | None = None, name: str | None = None, fmt: str = "swembed",
               repo_id: str | None = None, eval_files: Sequence[str | Path] = ()) -> str:
    """The README.md card of the swembed table folder ``table``: ``files`` is the folder whose files ship (the
    table itself, or an export of it: its size on disk), ``name`` its title (default: the folder's name), ``fmt``
    the format that ships (``swembed``, ``st``, ``model2vec``: its usage first), ``repo_id`` where it is or will be
    on the Hub, ``eval_files`` ``swembed eval --json`` results of the table (its scores)."""
    if table is None:
        raise HubError("a model card is made from a table folder: save the model first")
    if not _card_makers:
        raise RuntimeError("no model card maker is installed (import swembed installs it)")
    return _card_makers[0](Path(table), files=Path(files or table), name=name or Path(table).name, fmt=fmt,
                           repo_id=repo_id, eval_files=[Path(f) for f in eval_files])


# --- the push ---------------------------------------------------------------------------------------------------

def shipped_files(folder: Path) -> list[Path]:
    """The files of a table folder that go to the Hub: all but hidden ones (swembed's ownership marker)."""
    return sorted(p for p in folder.rglob("*") if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def push_table(folder: str | Path, repo_id: str, *, private: bool = False, revision: str | None = None,
               commit_message: str | None = None, token: str | None = None,
               eval_files: Sequence[str | Path] = ()) -> str:
    """Upload a table folder to the Hub as one commit: its files byte for byte, plus the README.md card
    (``model_card``); the repo is created if needed (``private``), the branch ``revision`` too (from main).
    Returns the commit's URL."""
    folder = Path(folder)
    read_model_folder(folder, scan_values=True)  # a damaged table is refused before anything is sent
    if not looks_like_repo_id(repo_id):
        raise HubError(f"{repo_id!r} is not a Hub repo id: give org/name")
    if (folder / CARD_FILE).exists():
        raise HubError(f"{folder / CARD_FILE}: a table folder holds no {CARD_FILE} of its own (the push writes the "
                       "card); move it away, or read the card first with swembed card")
    card = model_card(folder, repo_id=repo_id, eval_files=eval_files)
    hub = _hub()
    from huggingface_hub import errors

    api = hub.HfApi(token=token)
    operations = [hub.CommitOperationAdd(p.relative_to(folder).as_posix(), str(p)) for p in shipped_files(folder)]
    operations.append(hub.CommitOperationAdd(CARD_FILE, card.encode("utf-8")))
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        if revision:
            api.create_branch(repo_id, branch=revision, repo_type="model", exist_ok=True)
        info = api.create_commit(repo_id, operations, commit_message=commit_message or f"swembed: {folder.name}",
                                 revision=revision, repo_type="model")
    except errors.HfHubHTTPError as exc:
        raise HubError(f"{repo_id}: the Hub ({hub.constants.ENDPOINT}) refused the push: {_status(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the HTTP client's connection errors; ours and file errors pass
        if isinstance(exc, (ValueError, OSError)):
            raise
        raise HubError(f"{repo_id}: the Hub ({hub.constants.ENDPOINT}) cannot be reached: {_status(exc)}") from None
    return str(info.commit_url)
