"""The conditional log store ships compiled: the jar in the package was built from the packaged
source, for Java 17, and is what a session gets without a JDK; a source that differs from the jar's
is compiled, or refused in one line where no ``javac`` is."""

from __future__ import annotations

import hashlib
import io
import struct
import zipfile
from pathlib import Path

import pytest

from lakemerge import packaged
from lakemerge.errors import ConfigError
from lakemerge.spark import logstore

SOURCE = packaged.read_text("lakemerge.spark", logstore.SOURCE)
SHIPPED = packaged.read_bytes("lakemerge.spark", logstore.SHIPPED)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "lakemerge" / "jars"


def _no_javac() -> str:
    raise ConfigError("no javac here")


def test_the_shipped_jar_was_built_from_the_packaged_source() -> None:
    """Edited the Java source? ``logstore.rebuild()`` (with a JDK) builds the jar again."""
    assert logstore.built_from(SHIPPED) == hashlib.sha256(SOURCE.encode()).hexdigest()


def test_the_shipped_class_is_java_17_bytecode() -> None:
    with zipfile.ZipFile(io.BytesIO(SHIPPED)) as archive:
        compiled = archive.read(logstore.CLASS.replace(".", "/") + ".class")
    magic, _minor, major = struct.unpack(">IHH", compiled[:8])
    assert (magic, major) == (0xCAFEBABE, 61)


def test_without_a_jdk_the_session_gets_the_shipped_jar(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setattr(logstore, "_javac", _no_javac)
    found = logstore.jar()
    assert found.parent == cache and found.read_bytes() == SHIPPED
    assert logstore.jar() == found  # (placed once)


def test_an_edited_source_without_a_jdk_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    edited = SOURCE.replace("return false;", "return false; // edited")
    monkeypatch.setattr(packaged, "read_text", lambda package, name: edited)
    monkeypatch.setattr(logstore, "_javac", _no_javac)
    with pytest.raises(ConfigError, match="no javac here"):
        logstore.jar()


def test_an_edited_source_is_compiled_with_the_jdk(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    try:
        logstore._javac()
        logstore._delta_storage()
    except ConfigError as missing:
        pytest.skip(str(missing))
    edited = SOURCE.replace("return false;", "return false; // edited")
    monkeypatch.setattr(packaged, "read_text", lambda package, name: edited)
    found = logstore.jar()
    assert logstore.built_from(found.read_bytes()) == hashlib.sha256(edited.encode()).hexdigest()
    with zipfile.ZipFile(found) as archive:
        assert logstore.CLASS.replace(".", "/") + ".class" in archive.namelist()
