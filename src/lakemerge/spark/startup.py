"""Why a Spark JVM did not start, read from what it wrote while starting.

PySpark only says that its gateway exited; the reason (a package Spark's resolver could not find,
no Java, a Java too old) is in the JVM's own output, which lakemerge sends to its Spark log. This
module turns it into one line naming the artifact or the program, and what to do.
"""

from __future__ import annotations

import re
from pathlib import Path

from lakemerge.errors import ConfigError

#: Ivy's names of what it could not fetch: ``group#artifact;version``.
_UNRESOLVED = re.compile(r"unresolved dependency: ([^#\s]+)#([^;\s]+);([^:\s\]]+)")
_DOWNLOAD = re.compile(r"download failed: ([^#\s]+)#([^;\s]+);([^!\s]+)")
_NO_JAVA = ("JAVA_HOME is not set", "java: not found", "java: command not found", "No such file or directory: 'java'")


def log_offset(log_file: str) -> int:
    """Where the log ends now: what a starting JVM writes comes after it."""
    try:
        return Path(log_file).stat().st_size
    except OSError:
        return 0


def diagnose(log_file: str, offset: int, packages: str, exc: BaseException) -> ConfigError | None:
    """The reason a JVM started with ``packages`` (``spark.jars.packages``) exited before PySpark
    reached it, from the log written after ``offset``; ``None`` when nothing there explains it."""
    try:
        with open(log_file, "rb") as log:
            log.seek(offset)
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        text = ""
    text = f"{text}\n{exc}"
    missing = [":".join(m) for m in (*_UNRESOLVED.findall(text), *_DOWNLOAD.findall(text))]
    if missing:
        return _unresolved(list(dict.fromkeys(missing)), packages, log_file)
    if any(sign in text for sign in _NO_JAVA):
        return ConfigError("Spark needs Java 17 or newer, and none was found: install one, or set JAVA_HOME to it")
    if "UnsupportedClassVersionError" in text:
        return ConfigError("Spark needs Java 17 or newer: set JAVA_HOME to one (the Java found is older)")
    return None


def _unresolved(missing: list[str], packages: str, log_file: str) -> ConfigError:
    asked = [p.strip() for p in packages.split(",") if p.strip()]
    first = missing[0]
    owner = next((p for p in asked if p == first), None)
    # (A dependency is most likely one of the packages of its group released with it.)
    group, _, version = first.split(":")
    kin = [p for p in asked if p.startswith(f"{group}:") and p.endswith(f":{version}")]
    if owner is not None:
        what = f"Spark could not resolve the package {first}"
    else:
        what = f"Spark could not resolve {first}, a dependency of {', '.join(kin or asked)}"
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    return ConfigError(
        f"{what}{more}: no repository Spark reached has it; check its coordinates in [spark] packages, "
        f"the network, or spark.jars.repositories (Spark's log: {log_file})"
    )
