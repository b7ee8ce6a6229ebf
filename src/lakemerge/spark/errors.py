"""Translate Spark and Delta exceptions into lakemerge's errors, keeping Java's noise out."""

from __future__ import annotations

from lakemerge.errors import ConflictError, InputError, LakemergeError

_CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "MetadataChangedException",
    "ProtocolChangedException",
    "ConcurrentWriteException",
)


def first_line(exc: BaseException) -> str:
    """The most telling line of a (possibly Java) exception's message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if "Exception:" in line and not line.startswith("at "):
            return line.split("Exception:", 1)[1].strip()[:400]
    return (lines[0] if lines else type(exc).__name__)[:400]


def translate(exc: BaseException, *, reading: bool) -> LakemergeError | None:
    """A LakemergeError for a Spark/py4j exception, or ``None`` when it is not Spark's."""
    if isinstance(exc, LakemergeError):
        return exc
    module = type(exc).__module__
    if not module.startswith(("pyspark", "py4j", "delta")):
        return None
    text = str(exc)
    if any(name in text for name in _CONFLICTS):
        return ConflictError(f"a concurrent writer changed the table: {first_line(exc)}")
    if reading:
        return InputError(f"cannot read change files: {first_line(exc)}")
    return None
