"""Translate Spark and Delta exceptions into lakemerge's errors, keeping Java's noise out."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from lakemerge.errors import ConflictError, InputError, LakemergeError, first_line

_CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentWriteException",
)


def translate(exc: BaseException, *, reading: bool) -> LakemergeError | None:
    """A LakemergeError for a Spark/py4j exception, or ``None`` when it is not Spark's."""
    if isinstance(exc, LakemergeError):
        return exc
    module = type(exc).__module__
    if not module.startswith(("pyspark", "py4j", "delta")):
        return None
    text = str(exc)
    # (PySpark converts some of Delta's exceptions to Python classes of the same name, whose text
    # leaves the name out.)
    found = next((name for name in _CONFLICTS if name == type(exc).__name__ or name in text), None)
    if found is not None:
        # (Delta's own text guesses at streaming queries sharing a checkpoint: not what happened here.)
        return ConflictError(f"a concurrent writer committed to the table first (Delta's {found})")
    if reading:
        return InputError(f"cannot read change files: {first_line(exc)}")
    return None


@contextlib.contextmanager
def translated(*, reading: bool) -> Iterator[None]:
    """Spark's exceptions raised in the block, as lakemerge's errors where :func:`translate` knows
    them (``reading``: while reading change files, whose failures name them)."""
    try:
        yield
    except Exception as exc:
        raise (translate(exc, reading=reading) or exc) from exc
