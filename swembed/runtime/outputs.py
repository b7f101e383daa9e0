"""What swembed writes, and what it may replace.

Every folder swembed writes carries ``.swembed-output.json`` (the kind of output, the swembed version, and
every file and folder it wrote). ``--overwrite`` replaces an existing output only when swembed owns it: a
folder whose marker lists everything in it, and which holds no input of the command (input file, model,
corpus); a file that is not a folder and not an input. Anything else is refused in one line, every byte left.

Writes are atomic: a hidden temp beside the output (``.NAME.swembed-HOST-PID-...``) is renamed onto it when
complete. The temp is removed on failure, on Ctrl-C and on SIGTERM (``terminate_raises``), and one left by a
process that died anyway (SIGKILL, power loss) is removed by the next run that writes beside it.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER_FILE = ".swembed-output.json"
_TEMP_TAG = ".swembed-"  # temp names: .<output name>.swembed-<host>-<pid>-<random>[suffix]
_HOST = socket.gethostname().replace("-", "_").replace(".", "_") or "host"
_DEFERRED = {signal.SIGINT, signal.SIGTERM}


class OutputExistsError(ValueError):
    """An output exists and swembed may not replace it."""


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def _entries(folder: Path) -> set[str]:
    """Every file and folder under ``folder`` (hidden ones too; linked folders are not followed), relative."""
    found = set()
    for root, dirs, files in os.walk(folder):
        base = Path(root).relative_to(folder)
        found.update((base / name).as_posix() for name in dirs + files)
    return found


def read_marker(folder: str | Path) -> dict:
    """The folder's ownership marker as written (empty when it has none or it does not parse)."""
    try:
        marker = json.loads((Path(folder) / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return marker if isinstance(marker, dict) else {}


def _marker_entries(folder: Path) -> set[str] | None:
    """The entries the folder's marker lists, or None when it has no readable marker."""
    try:
        marker = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
        listed = marker["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {str(name) for name in listed} if isinstance(listed, list) else None


def _why_not_replaceable(out: Path, inputs: Iterable[str | Path], folder: bool) -> str | None:
    """Why swembed may not replace the existing ``out``, or None when it may."""
    if out.is_symlink():
        return "it is a symbolic link, which swembed did not write"
    resolved = out.resolve()
    for item in inputs:
        path = Path(str(item).removeprefix("model2vec:"))  # a hub id or stdin ("-") names no local path
        if str(item) not in ("", "-") and path.exists() and _inside(path.resolve(), resolved):
            return (f"it is {item}, an input of this command" if path.resolve() == resolved
                    else f"it holds {item}, an input of this command")
    if not folder:
        return "it is a folder; give a file name" if out.is_dir() else None
    if not out.is_dir():
        return "it is a file, and this command writes a folder"
    listed = _marker_entries(out)
    if listed is None:
        return f"it has no {MARKER_FILE}, so swembed did not write it"
    foreign = sorted(_entries(out) - listed - {MARKER_FILE})
    if foreign:
        return (f"it holds {len(foreign)} {'entry' if len(foreign) == 1 else 'entries'} swembed did not write "
                f"(e.g. {foreign[0]})")
    return None


def check_writable(out: str | Path, overwrite: bool, inputs: Iterable[str | Path] = (), folder: bool = True) -> None:
    """Refuse an existing output unless ``overwrite`` and swembed owns it (see the module's doc); checked before
    any work, and again when committing. ``folder``: the output is a folder (else a file). A path with no name
    of its own (``.``, ``..``) is refused first."""
    out = Path(out)
    if out.name in ("", ".", ".."):
        raise OutputExistsError(f"{out}: an output needs a name of its own (not . or ..); give a folder or file name")
    if not out.exists() and not out.is_symlink():
        return
    if not overwrite:
        raise OutputExistsError(f"{out} already exists; pass --overwrite to replace it")
    reason = _why_not_replaceable(out, inputs, folder)
    if reason:
        raise OutputExistsError(f"{out} exists and --overwrite will not replace it: {reason}. Nothing was changed; "
                                "move it away or choose another output")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temp_name(out: Path, suffix: str = "") -> Path:
    return out.with_name(f".{out.name}{_TEMP_TAG}{_HOST}-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


def sweep_stale_temps(out: Path) -> list[Path]:
    """Remove the temps that a dead process of this host left beside ``out``; returns what was removed."""
    removed = []
    prefix = f".{out.name}{_TEMP_TAG}{_HOST}-"
    try:
        candidates = [p for p in out.parent.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return removed
    for path in candidates:
        pid = path.name[len(prefix):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            _remove(path)
            removed.append(path)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends (a commit's renames and clean-up are not cut in half)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _DEFERRED)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


@contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block SIGTERM raises SystemExit(143) (as Ctrl-C raises KeyboardInterrupt), so every ``finally``
    and clean-up runs. Only where SIGTERM has its default action and on the main thread."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _write_marker(tmp: Path, kind: str, record: dict | None = None) -> None:
    from swembed import __version__

    files = sorted(_entries(tmp) - {MARKER_FILE})
    marker = {"kind": kind, "swembed_version": __version__, "files": files, **(record or {})}
    (tmp / MARKER_FILE).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


@contextmanager
def atomic_directory(out: str | Path, overwrite: bool = False, kind: str = "output",
                     inputs: Iterable[str | Path] = (), record: dict | None = None) -> Iterator[Path]:
    """Yield a temp folder beside ``out``; on success it gets the ownership marker (with ``record``'s entries, as
    filled by then) and replaces ``out`` (an existing one only when ``overwrite`` and swembed owns it); on error
    or signal it is removed."""
    out = Path(out)
    inputs = list(inputs)
    check_writable(out, overwrite, inputs)
    out.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(out)
    with terminate_raises():
        tmp = temp_name(out)
        try:
            tmp.mkdir()
            yield tmp
            _write_marker(tmp, kind, record)
            with signals_deferred():
                check_writable(out, overwrite, inputs)
                if out.exists():
                    old = temp_name(out, "-old")
                    os.replace(out, old)
                    os.replace(tmp, out)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


@contextmanager
def atomic_file(path: str | Path, overwrite: bool = False, inputs: Iterable[str | Path] = (),
                checked: bool = True) -> Iterator[Path]:
    """Yield a temp file name beside ``path`` (same suffix); on success it replaces ``path`` (an existing file
    only when ``overwrite``; never a folder, a link or an input); on error or signal it is removed.
    ``checked=False``: a file swembed owns (a stage's cache), replaced without asking."""
    path = Path(path)
    inputs = list(inputs)
    if checked:
        check_writable(path, overwrite, inputs, folder=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(path)
    with terminate_raises():
        tmp = temp_name(path, path.suffix)
        try:
            yield tmp
            with signals_deferred():
                if checked:
                    check_writable(path, overwrite, inputs, folder=False)
                os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
