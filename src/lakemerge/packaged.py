"""Files shipped inside the package (the demo's data, Spark's log configuration).

They are read through :mod:`importlib.resources`, never by building paths from ``__file__``, so
that they are found wherever and however lakemerge is installed, a zip archive included. A file
that is missing means the installation is broken: :class:`~lakemerge.errors.InstallationError`.
"""

from __future__ import annotations

from importlib import resources

from lakemerge.errors import InstallationError


def read_text(package: str, name: str) -> str:
    """The text of the packaged file ``name`` (a ``/``-separated path) of ``package``.

    Raises:
        InstallationError: the file is not in the installed package.
    """
    return read_bytes(package, name).decode("utf-8")


def read_bytes(package: str, name: str) -> bytes:
    """The bytes of the packaged file ``name`` (a ``/``-separated path) of ``package``.

    Raises:
        InstallationError: the file is not in the installed package.
    """
    try:
        found = resources.files(package)
        for part in name.split("/"):
            found = found.joinpath(part)
        return found.read_bytes()
    except (OSError, ModuleNotFoundError) as exc:
        raise InstallationError(f"{package.replace('.', '/')}/{name}") from exc
