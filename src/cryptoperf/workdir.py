"""Work directories and the paths a study names: where a file workload's files land.

A file workload's repetition gets a private directory of its own (``repetition_dir``), made
under the study's ``work_dir`` and removed when the repetition ends, also after a crash; the
directories a killed orchestrator left behind are swept at the next start (``sweep_stale``).
A path a study file names is confined to the study's directory and may not pass through a
symbolic link (``confined_path``), so that files land, and are read, where the study says.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

from cryptoperf.errors import WorkDirError


def writable_problem(root: str | Path, need_bytes: int = 0) -> str | None:
    """Why a file workload cannot use ``root``, or None: it must not be a symbolic link
    (``root_problem``), must exist (or be creatable), be a writable directory and have
    ``need_bytes`` free (``shutil.disk_usage``)."""
    p = Path(root)
    problem = root_problem(p)
    if problem:
        return problem
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".cryptoperf-check-", dir=p) as d:
            (Path(d) / "probe").write_bytes(b"x")
    except OSError as e:
        return f"work directory {p} is not writable: {e.strerror or e}"
    free = shutil.disk_usage(p).free
    if need_bytes > free:
        return (f"work directory {p} has {free / 2**20:.0f} MiB free, the study's files need "
                f"{need_bytes / 2**20:.0f} MiB; free space or choose a smaller file_bytes")
    return None


def root_problem(root: str | Path) -> str | None:
    """Why ``root`` cannot hold repetition directories, or None: a symbolic link is refused
    (the directory it points to can change between the up-front check and a repetition, and
    the files would not be where the study says), as is an existing path that is not a
    directory. A root that cannot be looked at (absent, under a file) is no problem here:
    ``writable_problem`` and ``repetition_dir`` say why when they make it or use it."""
    try:
        st = os.lstat(root)
    except OSError:  # absent, or under a file: what making or using it says (writable_problem)
        return None
    except ValueError as e:  # a NUL character
        return f"work directory {root} cannot be used: {e}"
    if stat.S_ISLNK(st.st_mode):
        return (f"work directory {root} is a symbolic link (to {os.readlink(root)}); name the directory "
                f"itself ({os.path.realpath(root)}), so that the files land where the study says")
    if not stat.S_ISDIR(st.st_mode):
        return f"work directory {root} is not a directory"
    return None


#: A repetition directory's name: this prefix, the orchestrator's pid, '-' and mkdtemp's letters.
REPETITION_DIR_PREFIX = "cryptoperf-io-"


def sweep_stale(root: str | None) -> list[str]:
    """Remove the repetition directories under ``root`` (None: the system's temporary
    directory) that an orchestrator killed with SIGKILL left behind: those named for a pid
    that no longer runs, owned by this user, not symbolic links. Returns the paths removed.
    Never raises for a directory it cannot read or remove (it is left as it is)."""
    where = root if root is not None else tempfile.gettempdir()
    removed = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return removed
    for e in entries:
        if not e.name.startswith(REPETITION_DIR_PREFIX):
            continue
        pid_text = e.name[len(REPETITION_DIR_PREFIX):].split("-", 1)[0]
        try:
            st = e.stat(follow_symlinks=False)
            pid = int(pid_text)
        except (OSError, ValueError):
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or pid <= 0 or _alive(pid):
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        if not os.path.lexists(e.path):
            removed.append(e.path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


@contextlib.contextmanager
def repetition_dir(needs_dir: bool, root: str | None):
    """A private directory for one repetition of a workload whose spec ``needs_dir`` (a file
    workload) under ``root`` (the system's temporary directory when None), removed when the
    block ends — also after a crash or a kill of the worker; yields None when not
    ``needs_dir``.

    The directory is made by ``tempfile.mkdtemp`` (a fresh name, mode 0700, owned by this
    user) directly inside ``root``, and checked to be just that before it is used. Raises
    WorkDirError (one line) when ``root`` is a symbolic link or not a directory, or the
    directory cannot be made."""
    if not needs_dir:
        yield None
        return
    where = root if root is not None else tempfile.gettempdir()
    problem = root_problem(where)
    if problem:
        raise WorkDirError(problem)
    try:
        d = tempfile.mkdtemp(prefix=f"{REPETITION_DIR_PREFIX}{os.getpid()}-", dir=where)
    except OSError as e:
        raise WorkDirError(f"cannot make a repetition directory in work directory {where}: "
                           f"{e.strerror or e}") from None
    try:
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise WorkDirError(f"repetition directory {d} is not a private directory of this user "
                               f"(mode {stat.S_IMODE(st.st_mode):o}, owner {st.st_uid}); refusing to use it")
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def confined_path(text: str, base: str | Path, *, absolute_ok: bool) -> Path:
    """The path a study file names (``text``), checked and made absolute: relative to ``base``
    (the study file's directory) and inside it, or — with ``absolute_ok`` — absolute.

    Refused, with ValueError (one line saying what to write instead): an empty path; a NUL
    character; an absolute path unless ``absolute_ok``; a relative path whose ``..`` leads out
    of ``base``, and ``..`` anywhere in an absolute path; any existing component of the path as
    written (below ``base`` for a relative one, from ``/`` for an absolute one) that is a
    symbolic link, since the files would then land (or be read) somewhere the study does not
    say, and could be moved there between the check and the use. ``base`` itself is taken as
    given. Returns the absolute, normalised path (which need not exist yet)."""
    if not text:
        raise ValueError("is empty; name a directory or leave the key out")
    if "\0" in text:
        raise ValueError("contains a NUL character, which no path can")
    p = PurePosixPath(text)
    base = Path(os.path.abspath(base))
    if p.is_absolute():
        if not absolute_ok:
            raise ValueError(f"is an absolute path; name a file relative to the study file's directory "
                             f"({base}) and inside it")
        if ".." in p.parts:
            raise ValueError("has a '..' component; write the path without it")
        start, parts = Path("/"), PurePosixPath(os.path.normpath(text)).parts[1:]
    else:
        norm = os.path.normpath(text)
        if norm == ".." or norm.startswith("../"):
            raise ValueError(f"leads out of the study file's directory ({base}) through '..'; name a "
                             "path inside it" + (", or an absolute one" if absolute_ok else ""))
        start, parts = base, () if norm == "." else PurePosixPath(norm).parts
    full = start.joinpath(*parts)
    current = start
    for part in parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            break
        except OSError as e:
            raise ValueError(f"cannot be checked: {current}: {e.strerror or e}") from None
        if stat.S_ISLNK(st.st_mode):
            raise ValueError(f"goes through a symbolic link, {current} (to {os.readlink(current)}); name "
                             f"the real path ({os.path.realpath(current)}...), so that the files are "
                             "where the study says")
    return full
