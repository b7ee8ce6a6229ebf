"""The one exception hierarchy of lakemerge.

Every error a user can cause derives from :class:`LakemergeError` and says *where* the problem is:
a configuration key, a file and row, a table path. The CLI prints ``str(error)`` on one line and
exits with the error's ``exit_code``.
"""

from __future__ import annotations


class LakemergeError(Exception):
    """Root of every error lakemerge raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        #: What the failing command committed before it failed (``lakemerge run``'s earlier batches,
        #: as :class:`lakemerge.results.BatchResult`): set by the run loop, shown by the CLI.
        self.committed: tuple[object, ...] = ()

    def __str__(self) -> str:
        return self.message


class ConfigError(LakemergeError):
    """A configuration value is missing, unknown or invalid.

    Attributes:
        key: dotted path of the offending key (``tables.products.key``), if known.
        source: the file the configuration came from, if any.
    """

    exit_code = 2

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None) -> None:
        where = ", ".join(part for part in (source, f"key '{key}'" if key else None) if part)
        super().__init__(f"{where}: {message}" if where else message)
        self.key = key
        self.source = source


class InputError(LakemergeError):
    """A change file cannot be used: missing, unreadable, or holding bad records.

    Attributes:
        path: the change file (or input path) concerned.
        row: 1-based row number inside that file, when one row is to blame.
    """

    exit_code = 3

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None) -> None:
        where = path or ""
        if row is not None:
            where = f"{where}, row {row}" if where else f"row {row}"
        super().__init__(f"{where}: {message}" if where else message)
        self.path = path
        self.row = row


class SchemaError(LakemergeError):
    """The feed's columns cannot be written to the table (incompatible types, missing keys)."""

    exit_code = 3


class TableError(LakemergeError):
    """The target table is missing or is not a table lakemerge can maintain."""

    exit_code = 2


class ConflictError(LakemergeError):
    """A concurrent writer changed the table and the batch gave up retrying."""

    exit_code = 4


class InstallationError(LakemergeError):
    """A file that lakemerge ships inside its package is missing: the installation is broken.

    Attributes:
        packaged: the missing file, as a path inside the installed package.
    """

    exit_code = 1

    def __init__(self, packaged: str) -> None:
        super().__init__(
            f"lakemerge's installation is broken: its packaged file {packaged} is missing; "
            "reinstall it (pip install --force-reinstall lakemerge, or pip install --force-reinstall . "
            "from a checkout)"
        )
        self.packaged = packaged


class AccountingError(LakemergeError):
    """Internal check failed: the batch's row counts do not add up. Never committed."""

    exit_code = 1


def first_line(exc: BaseException) -> str:
    """The most telling line of a (possibly Java) exception's message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "Exception:" in line and not line.startswith("at "):
            return line.split("Exception:", 1)[1].strip()[:400]
    return (lines[0] if lines else type(exc).__name__)[:400]
