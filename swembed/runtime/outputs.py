"""What swembed writes, and what it may replace: ``check_writable`` is the one output check every writer calls.

An output never is, holds or lies inside an input of its command (input file, model folder and every file in
it, corpus), whether or not it exists yet, and never replaces a special file (FIFO, device, socket). Every
folder swembed writes carries ``.swembed-output.json`` (the kind of output, the swembed version, and every
file and folder it wrote). ``--overwrite`` replaces an existing output only when swembed owns it: a folder
whose marker lists everything in it; a regular file that is not a link. Anything else is refused in one line,
every byte left.

Writes are atomic: a hidden temp folder beside the output (``.NAME.swembed-HOST-PID-...``, holding the file
of a file output) is renamed onto it when complete. The temp is removed on failure, on Ctrl-C and on SIGTERM
(``terminate_raises``); one left by a process that died anyway (SIGKILL, power loss) is removed by the next
run that writes beside it (whatever its output) or in the system temp folder, and only when its process is dead
and it carries swembed's temp marker (``.swembed-temp``, naming the folder) or a complete ownership marker: a
folder that merely matches the name pattern is left alone.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from swembed.runtime.testpoints import reached

MARKER_FILE = ".swembed-output.json"
TEMP_MARKER = ".swembed-temp"  # inside each temp folder: the folder's own name (what the stale-temp sweep checks)
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
    found: set[str] = set()
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


def _as_written(path: Path) -> Path:
    """Where writing ``path`` puts bytes: its folder with links resolved, its own name not followed (a link there
    is replaced, not written through)."""
    return path.parent.resolve() / path.name


def special_kind(path: Path, follow_links: bool = False) -> str | None:
    """What ``path`` is when it is neither a regular file, a folder nor a link (FIFO, device, socket), else None;
    ``follow_links``: what a link leads to."""
    try:
        mode = (os.stat if follow_links else os.lstat)(path).st_mode
    except OSError:
        return None
    kinds = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((what for test, what in kinds if test(mode)), None)


def _input_relation(out: Path, inputs: Iterable[str | Path]) -> str | None:
    """How ``out`` meets an input of the command (is it, holds it, lies inside it), or None."""
    written = _as_written(out)
    for item in inputs:
        path = Path(str(item).removeprefix("model2vec:"))  # a hub id or stdin ("-") names no local path
        if str(item) in ("", "-") or not path.exists():
            continue
        source = path.resolve()
        if source == written or (out.is_file() and not out.is_symlink() and path.is_file()
                                 and os.path.samefile(out, path)):
            return f"it is {item}, an input of this command"
        if _inside(source, written):
            return f"it holds {item}, an input of this command"
        if _inside(written, source):
            return f"it lies inside {item}, an input of this command"
    return None


def _why_not_replaceable(out: Path, folder: bool) -> str | None:
    """Why swembed may not replace the existing ``out`` (inputs already checked), or None when it may."""
    if out.is_symlink():
        return "it is a symbolic link, which swembed did not write"
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
    """The output check of every command that writes (see the module's doc): refuse an output that is, holds or
    lies inside an input, a special file, and an existing output unless ``overwrite`` and swembed owns it.
    Called before any work, and again when committing. ``folder``: the output is a folder (else a file). A path
    with no name of its own (``.``, ``..``) is refused first."""
    out = Path(out)
    if out.name in ("", ".", ".."):
        raise OutputExistsError(f"{out}: an output needs a name of its own (not . or ..); give a folder or file name")
    reason = _input_relation(out, inputs)
    special = special_kind(out)
    if reason or special:
        raise OutputExistsError(f"{out} cannot be an output: {reason or f'it is {special}, not a regular file'}. "
                                "Nothing was changed; choose another output")
    if not out.exists() and not out.is_symlink():
        return
    if not overwrite:
        raise OutputExistsError(f"{out} already exists; pass --overwrite to replace it")
    reason = _why_not_replaceable(out, folder)
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


def _make_temp_folder(out: Path) -> Path:
    """A new temp folder beside ``out``, carrying ``TEMP_MARKER`` (its own name's bytes, whatever their encoding:
    so that a sweep knows swembed made it); removed again if the marker cannot be written."""
    tmp = temp_name(out)
    tmp.mkdir()
    try:
        (tmp / TEMP_MARKER).write_bytes(os.fsencode(tmp.name))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def scratch_folder(name: str) -> Path:
    """A temp folder of this process in the system temp folder (``tempfile.gettempdir()``), named and marked as
    the temps beside outputs are, so that the next swembed run sweeps it if this process dies (SIGKILL) before
    removing it. The caller removes it."""
    import tempfile

    folder = Path(tempfile.gettempdir())
    _sweep_folder(folder)
    return _make_temp_folder(folder / name)


def _give_normal_modes(tmp: Path, *paths: Path) -> None:
    """Files written into the temp folder ``tmp`` get the mode a plain write gives (0o666 less the umask: that of
    its ``TEMP_MARKER``, written by ``open``), whoever wrote them: a library writing through ``mkstemp``
    (safetensors' model.safetensors) leaves 0o600. ``paths``: those files (default: every file under ``tmp``)."""
    mode = stat.S_IMODE(os.stat(tmp / TEMP_MARKER).st_mode)
    if not paths:
        paths = tuple(Path(root, name) for root, _, names in os.walk(tmp) for name in names)
    for path in paths:
        info = os.lstat(path)
        wanted = mode | (stat.S_IMODE(info.st_mode) & 0o111)  # an executable keeps its x bits
        if stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) != wanted:
            os.chmod(path, wanted)


def _swembed_made(path: Path) -> bool:
    """Whether the temp-named ``path`` is a folder swembed made: its ``TEMP_MARKER`` names it, or (an output
    moved aside while being replaced, or complete but not yet renamed) its ownership marker lists all it holds."""
    if path.is_symlink() or not path.is_dir():
        return False
    try:
        if (path / TEMP_MARKER).read_bytes() == os.fsencode(path.name):
            return True
    except OSError:
        pass
    listed = _marker_entries(path)
    return listed is not None and not _entries(path) - listed - {MARKER_FILE}


_swept: set[Path] = set()  # folders this process has swept already


def _dead_temp(name: str) -> tuple[str, int] | None:
    """(output name, pid) of a temp name of this host (``.<output>.swembed-<host>-<pid>-<random>[suffix]``) whose
    process is dead, else None."""
    tag = f"{_TEMP_TAG}{_HOST}-"
    if not name.startswith(".") or tag not in name:
        return None
    out_name, _, rest = name[1:].rpartition(tag)
    pid = rest.split("-", 1)[0]
    if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
        return None
    return out_name, int(pid)


def _sweep_folder(folder: Path) -> list[Path]:
    """Remove the temps that dead processes of this host left in ``folder``, whatever output they were for (only
    folders swembed made: ``_swembed_made``); an older output moved aside (``-old``) whose replacement never landed
    is put back. Returns what was removed."""
    removed: list[Path] = []
    try:
        candidates = sorted(p for p in folder.iterdir() if _dead_temp(p.name) is not None)
    except OSError:
        return removed
    for path in candidates:
        if not _swembed_made(path):
            continue
        out = folder / (_dead_temp(path.name) or ("", 0))[0]
        if path.name.endswith("-old") and not out.exists() and not out.is_symlink():
            os.replace(path, out)  # killed between its two renames: the older output is the one to keep
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def sweep_stale_temps(out: Path) -> list[Path]:
    """Remove the temps that dead processes of this host left beside ``out`` (for any output there, not only
    ``out``) and, once a process, in the system temp folder (``scratch_folder``'s); only folders swembed made.
    Returns what was removed."""
    import tempfile

    removed = _sweep_folder(out.parent)
    system = Path(tempfile.gettempdir())
    if system not in _swept:
        _swept.add(system)
        removed += _sweep_folder(system)
    return removed


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


def _importing(frame) -> bool:
    """Whether ``frame`` (where a signal landed) runs inside an import. An exception raised there can leave a native
    module half initialised: pybind11 turns it into ``ImportError: initialization failed`` (onnxruntime), or C++
    aborts the process."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


IMPORT_GRACE_S = 10.0  # how long a signal waits for imports to finish (code run by an import waits no longer)
_held_since: float | None = None  # when the signal now held for an import first landed


def _raise_for(signum: int, frame) -> None:
    """SIGTERM -> SystemExit(143), SIGINT -> KeyboardInterrupt; a signal that lands inside an import is sent again
    50 ms later, until the import has finished (``IMPORT_GRACE_S`` at most)."""
    global _held_since
    if _importing(frame):
        _held_since = _held_since if _held_since is not None else time.monotonic()
        if time.monotonic() - _held_since < IMPORT_GRACE_S:
            again = threading.Timer(0.05, os.kill, (os.getpid(), signum))
            again.daemon = True
            again.start()
            return
    _held_since = None
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


@contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block SIGTERM raises SystemExit(143) (as Ctrl-C raises KeyboardInterrupt), so every ``finally``
    and clean-up runs; either signal waits for an import under way to finish. Only where SIGTERM has its default
    action (SIGINT: Python's) and on the main thread."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return
    interrupt = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    signal.signal(signal.SIGTERM, _raise_for)
    if interrupt:
        signal.signal(signal.SIGINT, _raise_for)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _write_marker(tmp: Path, kind: str, record: dict | None = None) -> None:
    from swembed._version import __version__

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
        tmp = _make_temp_folder(out)
        try:
            reached(f"{out.name}: temp folder made")
            yield tmp
            _give_normal_modes(tmp)
            (tmp / TEMP_MARKER).unlink()
            _write_marker(tmp, kind, record)
            reached(f"{out.name}: written")
            with signals_deferred():
                check_writable(out, overwrite, inputs)
                if out.exists():
                    old = temp_name(out, "-old")
                    os.replace(out, old)
                    os.replace(tmp, out)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.replace(tmp, out)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            named = write_error(out, exc)
            if named is not None:
                raise named from None
            raise


def write_error(out: Path, exc: BaseException) -> OSError | None:
    """For a write error that names no file (a full disk, a file-size limit: numpy says only "96000 requested and
    4968 written"), the same error naming ``out``; None for any other exception."""
    if not isinstance(exc, OSError) or exc.filename is not None:
        return None
    return OSError(f"{out}: not written ({exc.strerror or exc}; is the disk full?); nothing was replaced")


@contextmanager
def atomic_file(path: str | Path, overwrite: bool = False, inputs: Iterable[str | Path] = (),
                checked: bool = True) -> Iterator[Path]:
    """Yield a temp file name (``path``'s own name, in a temp folder beside it); on success it replaces ``path``
    (an existing file only when ``overwrite``; never a folder, a link, a special file or an input); on error or
    signal it is removed. ``checked=False``: a file swembed owns (a stage's cache), replaced without asking."""
    path = Path(path)
    inputs = list(inputs)
    if checked:
        check_writable(path, overwrite, inputs, folder=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(path)
    with terminate_raises():
        folder = _make_temp_folder(path)
        try:
            reached(f"{path.name}: temp file made")
            yield folder / path.name
            if (folder / path.name).exists():
                _give_normal_modes(folder, folder / path.name)
            reached(f"{path.name}: written")
            with signals_deferred():
                if checked:
                    check_writable(path, overwrite, inputs, folder=False)
                os.replace(folder / path.name, path)
                shutil.rmtree(folder, ignore_errors=True)
        except BaseException as exc:
            shutil.rmtree(folder, ignore_errors=True)
            named = write_error(path, exc)
            if named is not None:
                raise named from None
            raise
