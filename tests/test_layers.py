"""The library's architecture holds: lint (the layer rules of each folder's ruff.toml) and type checks
pass, no module imports itself through others, the bottom modules import nothing above them, and
modules and the batch spine's functions stay small enough to read."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "lakemerge"
#: Modules every layer may import: they import nothing of lakemerge's but the errors.
BOTTOM = ("lakemerge.errors", "lakemerge.results", "lakemerge.columns", "lakemerge.packaged")
#: The modules that drive a classic session's JVM through py4j; the others reach Spark through
#: DataFrames, SQL and the backend and filesystem interfaces, so that they run over Spark Connect.
JVM_MODULES = frozenset(
    {
        "lakemerge.spark.jvm",
        "lakemerge.spark.classic",
        "lakemerge.spark.tail",
        "lakemerge.storage.hadoop",
        "lakemerge.table.jvm_snapshot",
        "lakemerge.table.direct",
        "lakemerge.table.transaction",
    }
)
#: PySpark's handles of a classic session's JVM objects.
_JVM_HANDLES = frozenset({"_jvm", "_jsc", "_jsparkSession", "_jdf", "_gateway", "_jconf", "_jsparkContext"})


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of its own package (lakemerge, bench) ``name`` imports anywhere in its body (lazy
    imports included)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] != name.split(".")[0]:
                continue
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.add(child if child in modules else base)
    found.discard(name)
    return {m for m in found if m in modules}


def test_the_library_passes_lint_with_its_layer_rules_and_type_checks() -> None:
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "src", "tests", "bench", "manual"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert lint.returncode == 0, lint.stdout[-4000:]
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "src", "tests", "bench", "manual"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert formatted.returncode == 0, formatted.stdout[-2000:]
    typed = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert typed.returncode == 0, typed.stdout[-4000:]


def test_a_layer_crossing_fails_the_lint(tmp_path: Path) -> None:
    """The rules are real: a storage module importing the batch spine is refused by ruff."""
    crossing = PACKAGE / "table" / "_crossing_check.py"
    crossing.write_text(
        "from __future__ import annotations\n\nfrom lakemerge.batch import plan\n\n__all__ = ['plan']\n"
    )
    try:
        lint = subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--no-cache", str(crossing)],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        crossing.unlink()
    assert lint.returncode != 0 and "TID251" in lint.stdout and "table/ does not import lakemerge.batch" in lint.stdout


def jvm_uses(source: str) -> list[str]:
    """Where ``source`` drives a JVM: imports of py4j or of :mod:`lakemerge.spark.jvm`, and PySpark's
    handles of JVM objects (``spark._jsparkSession``, ``frame._jdf``...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or "", *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Attribute) and node.attr in _JVM_HANDLES:
            found.append(f"line {node.lineno}: .{node.attr}")
        for name in names:
            if name.split(".")[0] == "py4j" or name == "lakemerge.spark.jvm":
                found.append(f"line {node.lineno}: {name}")
    return found


def test_only_the_classic_backend_s_modules_drive_the_jvm() -> None:
    uses = {n: jvm_uses(p.read_text()) for n, p in _modules().items() if n not in JVM_MODULES}
    assert {n: found for n, found in uses.items() if found} == {}


def test_a_module_driving_the_jvm_is_found() -> None:
    """The check is real: each way of reaching the JVM is seen."""
    for source in (
        "from py4j.protocol import Py4JJavaError",
        "import py4j.java_gateway",
        "from lakemerge.spark.jvm import jclass",
        "from lakemerge.spark import jvm",
        "def f(spark):\n    return spark.sparkContext._jsc.hadoopConfiguration()",
        "def f(frame):\n    return frame._jdf",
    ):
        assert jvm_uses(source), source
    assert jvm_uses("from lakemerge.spark.backends import backend\n\nx = backend") == []


@pytest.mark.parametrize("package", [PACKAGE, ROOT / "bench"], ids=["lakemerge", "bench"])
def test_no_module_imports_itself_through_others(package: Path) -> None:
    modules = _modules(package)
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    top = package.name
    cycles = []
    for start in graph:
        seen, stack = set(), [(start, (start,))]
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start and len(trail) > 1 and not any(m == top for m in trail):
                    cycles.append(" → ".join((*trail, start)))
                elif nxt not in seen and nxt != top:
                    seen.add(nxt)
                    stack.append((nxt, (*trail, nxt)))
    assert cycles == []


@pytest.mark.parametrize("name", BOTTOM)
def test_the_bottom_modules_import_nothing_above_them(name: str) -> None:
    modules = _modules()
    assert _imports(name, modules[name], modules) <= {"lakemerge.errors"}


def test_modules_stay_under_four_hundred_lines_and_the_spines_functions_under_sixty() -> None:
    long_modules = {n: len(p.read_text().splitlines()) for n, p in _modules().items()}
    assert {n: lines for n, lines in long_modules.items() if lines > 400} == {}
    long_functions = {}
    for path in (PACKAGE / "batch").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 60:
                    long_functions[f"{path.name}:{node.name}"] = length
    assert long_functions == {}


def test_no_subpackage_shadows_a_public_name() -> None:
    """Importing a subpackage sets it as an attribute of ``lakemerge``: none may share a name of the
    public API (``lakemerge.apply`` must stay the function whatever has been imported)."""
    import importlib

    import lakemerge

    public = {name: getattr(lakemerge, name) for name in lakemerge.__all__}
    for name in _modules():
        importlib.import_module(name)
    assert [n for n, value in public.items() if getattr(lakemerge, n) is not value] == []


def test_no_identifier_is_quoted_by_hand() -> None:
    """Column names reach Spark's SQL parser only through ``lakemerge.columns.quoted`` (or ``col``),
    which doubles a backtick inside a name; a hand-built ``f"`{name}`"`` would let one through."""
    import re

    hand_built = re.compile(r"(?<!`)`\{[^}]*\}`(?!`)")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in PACKAGE.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if hand_built.search(line)
    ]
    assert found == []
