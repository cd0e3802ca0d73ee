# SPDX-License-Identifier: MIT
"""The package's exceptions: a failure of the C library carries its
ly_last_error() message and status, raised as the Python exception of its
kind (FileNotFoundError, ValueError, NotImplementedError)."""
from . import _native as n


class LibreYOLOError(RuntimeError):
    """A failure of the C library; the message is its ly_last_error()."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


class LibreYOLOFileNotFoundError(LibreYOLOError, FileNotFoundError):
    pass


class LibreYOLOValueError(LibreYOLOError, ValueError):
    pass


class LibreYOLONotImplementedError(LibreYOLOError, NotImplementedError):
    pass


_BY_STATUS = {
    n.LY_E_NOT_FOUND: LibreYOLOFileNotFoundError,
    n.LY_E_INVALID_ARGUMENT: LibreYOLOValueError,
    n.LY_E_SHAPE: LibreYOLOValueError,
    n.LY_E_DTYPE: LibreYOLOValueError,
    n.LY_E_FORMAT: LibreYOLOValueError,
    n.LY_E_UNSUPPORTED: LibreYOLONotImplementedError,
}


def check(status):
    if status != n.LY_OK:
        # thread-local in the library, read on the thread that made the call
        message = (n.ly_last_error() or b"").decode("utf-8", "replace")
        raise _BY_STATUS.get(status, LibreYOLOError)(message, status)
