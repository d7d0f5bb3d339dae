"""Errors the user can fix: bad params or bad input, or a full disk.

A stage that meets one stops with exit status 2 and a message naming the key, or the file and
line, and what was expected: no traceback (:func:`ctxrep.stage.stage`). A full disk stops it
with exit status :data:`NO_SPACE_EXIT` and one line saying so (:func:`no_space_left`), a
write past ``ulimit -f`` with :data:`TOO_LARGE_EXIT` (:func:`file_too_large`)."""

from __future__ import annotations

import errno
import os
import re

# The exit status of a stage that ran out of disk space: ENOSPC's own number (28).
NO_SPACE_EXIT = errno.ENOSPC
# How a full disk reads when it is not an OSError: torch.save's zip writer ("PytorchStreamWriter
# failed writing file ...", "unexpected pos 123 vs 456"), SQLite under MLflow ("database or disk
# is full"), and any message that quotes strerror(ENOSPC).
_NO_SPACE_MESSAGE = re.compile(r"unexpected pos|No space left on device|database or disk is full",
                               re.IGNORECASE)


class InputError(ValueError):
    """Params, a data file or a folder are not what the pipeline needs."""


def exception_chain(exc: BaseException):
    """``exc``, then every exception it was raised from or while handling, breadth first,
    each once."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [e.__cause__, e.__context__]


def no_space_left(exc: BaseException) -> tuple[bool, str | None]:
    """Whether ``exc`` (or an exception it was raised from or while handling) says the disk is
    full, and the path being written when one is known: ``(full, path)``."""
    full, path = False, None
    for e in exception_chain(exc):
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            full = True
            path = path or _path_of(e)
        elif not isinstance(e, InputError) and _NO_SPACE_MESSAGE.search(str(e)):
            full = True
    return full, path


# The exit status of a stage stopped by the file-size limit (`ulimit -f`): EFBIG's number (27).
TOO_LARGE_EXIT = errno.EFBIG


def file_size_limit() -> int | None:
    """This process's file-size limit in bytes (``ulimit -f``), or None when there is none."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return None if soft == resource.RLIM_INFINITY else soft


def file_too_large(exc: BaseException) -> tuple[bool, str | None]:
    """Whether ``exc`` (or one it was raised from or while handling) is a write past the
    file-size limit, and the path when one is known: EFBIG ("File too large"), or, under a
    finite limit, SQLite's "disk I/O error" (which is all MLflow's store says) or torch.save's
    short write while no disk is full. Check it before :func:`no_space_left`, which reads the
    same short write as a full disk."""
    limited = file_size_limit() is not None
    for e in exception_chain(exc):
        if isinstance(e, OSError) and e.errno == errno.EFBIG:
            return True, _path_of(e)
        if "File too large" in str(e) or ("disk I/O error" in str(e) and limited):
            return True, None
        # torch.save's zip writer says "unexpected pos" whatever stopped the write: under a
        # finite limit, with no ENOSPC in the chain and room on every disk a stage writes to,
        # it is the limit (`ulimit -f`), not a full disk.
        if (limited and _TORCH_SHORT_WRITE.search(str(e)) and not _enospc_in(exc)
                and _full_places() is None):
            return True, None
    return False, None


_TORCH_SHORT_WRITE = re.compile(r"unexpected pos|PytorchStreamWriter failed writing")


def _enospc_in(exc: BaseException) -> bool:
    return any(isinstance(e, OSError) and e.errno == errno.ENOSPC for e in exception_chain(exc))


def too_large_message(path: str | None) -> str:
    limit = file_size_limit()
    what = f" ({limit:,} bytes)" if limit is not None else ""
    return (f"a file grew past this shell's file-size limit{what} while writing "
            f"{path or 'its outputs (or the MLflow store)'}: raise it (`ulimit -f unlimited`) "
            f"and rerun; completed outputs are kept")


def _path_of(e: OSError) -> str | None:
    name = e.filename if e.filename is not None else e.filename2
    if name is None or isinstance(name, int):  # an fd: no path to show
        return None
    return os.fsdecode(name)


def no_space_message(path: str | None) -> str:
    """The one line a stage prints when the disk is full: the folder of the file being written,
    or, when the error did not name one, whichever of the places a stage writes to (the
    checkout, the temporary folder, the user's cache) is (nearly) full."""
    where = os.path.dirname(os.path.abspath(path)) if path else (_full_places() or os.getcwd())
    return (f"no space left on device while writing {path or 'its outputs'}: free space "
            f"(df -h {where}) and rerun; completed outputs are kept")


def _full_places(threshold: int = 64 << 20) -> str | None:
    """The places a stage writes to with under ``threshold`` bytes free, space-separated."""
    import shutil
    import tempfile

    places = [os.getcwd(), tempfile.gettempdir(), os.path.expanduser("~/.cache")]
    full = []
    for place in places:
        try:
            if shutil.disk_usage(place).free < threshold and place not in full:
                full.append(place)
        except OSError:
            continue
    return " ".join(full) or None
