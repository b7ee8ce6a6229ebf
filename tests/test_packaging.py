"""What users install is what is tested: the sdist and the wheel built from it hold every file the
package reads, and the installed wheel runs the demo and a pipeline outside the checkout.

The build (sdist, then the wheel from the sdist, as ``python -m build`` does) runs in the default
suite; installing the wheel into a fresh virtual environment and running ``lakemerge`` from it is
``python -m pytest -m wheel`` (.ci/run runs it).
"""

from __future__ import annotations

import json
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import read_table, write_lines
from tests.wheels import ROOT, build, clean_copy, fresh_venv

PACKAGE = ROOT / "src" / "lakemerge"
#: Files under src/lakemerge that configure the tools working on the source tree, not the package.
SOURCE_ONLY = ("ruff.toml",)


def _package_data() -> list[str]:
    """Every file under src/lakemerge that is not Python source, as a path inside the package."""
    found = []
    for path in PACKAGE.rglob("*"):
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".py", ".pyc"):
            continue
        if path.name in SOURCE_ONLY:
            continue
        found.append(path.relative_to(PACKAGE.parent).as_posix())
    return sorted(found)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The sdist and the wheel built from it (in an isolated build environment, as pip builds), from
    a clean copy of the checkout."""
    yield build(clean_copy(tmp_path_factory.mktemp("checkout")), tmp_path_factory.mktemp("dist"))


def test_every_packaged_file_is_in_the_wheel_and_the_sdist(built: dict[str, Path]) -> None:
    data = _package_data()
    assert "lakemerge/demo/mutator.properties" in data and "lakemerge/spark/log4j2.properties" in data
    assert "lakemerge/spark/java/conditional-log-store.jar" in data  # (a JRE runs it: no javac at install)
    with zipfile.ZipFile(built["wheel"]) as wheel:
        in_wheel = set(wheel.namelist())
    assert [f for f in data if f not in in_wheel] == []
    python = sorted(p.relative_to(PACKAGE.parent).as_posix() for p in PACKAGE.rglob("*.py"))
    assert [f for f in python if f not in in_wheel] == []
    with tarfile.open(built["sdist"]) as sdist:
        in_sdist = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert [f for f in data if f"src/{f}" not in in_sdist] == []
    assert {"LICENSE", "README.md", "pyproject.toml"} <= in_sdist


def test_the_wheel_declares_its_licence_and_one_version(built: dict[str, Path]) -> None:
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert built["wheel"].name.startswith(f"lakemerge-{version}-")
    with zipfile.ZipFile(built["wheel"]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert f"\nVersion: {version}\n" in metadata
    import lakemerge

    assert lakemerge.__version__ == version
    assert not [p for p in PACKAGE.rglob("*.py") if f'"{version}"' in p.read_text()]


def _run(command: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.wheel
def test_the_installed_wheel_and_sdist_run_the_demo_and_a_pipeline(built: dict[str, Path], tmp_path: Path) -> None:
    """A fresh virtual environment outside the checkout, the wheel installed in it, and commands run
    from a directory outside the checkout: nothing can be read from src/."""
    venv = fresh_venv(tmp_path / "venv", tmp_path / "spark.log")
    env, bin_dir = venv.env, venv.bin
    work = tmp_path / "work"
    work.mkdir()
    # Without an extra, lakemerge brings no Spark (a platform's Spark may be on the path instead):
    # a command that needs one says how to install it, in one line.
    installed = _run([str(bin_dir / "pip"), "install", "-q", str(built["wheel"])], cwd=work, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    bare = _run([str(bin_dir / "lakemerge"), "demo", "--dir", "demo"], cwd=work, env=env)
    assert bare.returncode == 2, bare.stdout[-2000:] + bare.stderr[-3000:]
    assert bare.stderr.strip().splitlines() == [
        "error: PySpark is not installed: lakemerge runs on Spark 4.2 and 4.1 (pip install 'lakemerge[spark]')"
    ]
    installed = _run([str(bin_dir / "pip"), "install", "-q", f"{built['wheel']}[spark]"], cwd=work, env=env)
    assert installed.returncode == 0, installed.stderr[-3000:]
    where = _run([str(bin_dir / "python"), "-c", "import lakemerge; print(lakemerge.__file__)"], cwd=work, env=env)
    assert Path(where.stdout.strip()).is_relative_to(venv.root), where.stdout

    demo = _run([str(bin_dir / "lakemerge"), "demo", "--dir", "demo", "--json"], cwd=work, env=env)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    shown = json.loads(demo.stdout)
    assert [b["version"] for b in shown["batches"]] == [0, 1]
    stored = {r["product_id"]: r for r in read_table(work / "demo" / "lake" / "products")}
    assert "P0S7XBCQ45" not in stored and "3SDS30A11P" not in stored  # the delete file's keys
    assert stored["VR8NCNE7DV"]["inventory"] == 82 and stored["6QD0BAVS7I"]["price"] == 489

    header = "id,name,seq,op"
    write_lines(work / "landing" / "a.csv", [header, "1,one,1,I", "2,two,1,I", "1,uno,2,U"])
    (work / "pipeline.toml").write_text(
        '[tables.t]\npath = "lake/t"\nkey = "id"\nsequence = "seq"\n'
        '[tables.t.feed]\nlocation = "landing"\nheader = true\nop_column = "op"\n'
        'types = { id = "int", seq = "int" }\n'
    )
    applied = _run([str(bin_dir / "lakemerge"), "apply", "pipeline.toml", "--json"], cwd=work, env=env)
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-3000:]
    batch = json.loads(applied.stdout)["batches"][0]
    assert batch["version"] == 0 and batch["metrics"]["inserted"] == 2 and batch["metrics"]["superseded"] == 1
    assert read_table(work / "lake" / "t", ["id", "name"]) == [{"id": 1, "name": "uno"}, {"id": 2, "name": "two"}]

    # The sdist installs and runs as well (its wheel is built by pip from the sdist's files alone).
    again = _run(
        [str(bin_dir / "pip"), "install", "-q", "--force-reinstall", "--no-deps", str(built["sdist"])],
        cwd=work,
        env=env,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    demo = _run([str(bin_dir / "lakemerge"), "demo", "--dir", "demo2", "--json"], cwd=work, env=env)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
    assert [b["version"] for b in json.loads(demo.stdout)["batches"]] == [0, 1]


def test_a_missing_packaged_file_is_reported_as_a_broken_installation(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's files read from a package folder that lacks them: one line on stderr saying that
    the installation is broken and how to reinstall, exit code 1, no Python exception name."""
    from importlib import resources

    from typer.testing import CliRunner

    from lakemerge.cli.app import app

    empty = tmp_path / "installed"
    empty.mkdir()
    real = resources.files
    monkeypatch.setattr(resources, "files", lambda package: empty if package == "lakemerge.demo" else real(package))
    result = CliRunner().invoke(app, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: lakemerge's installation is broken: its packaged file ")
    assert "lakemerge/demo/mutator.properties is missing" in lines[-1] and "pip install --force-reinstall" in lines[-1]
    assert "Error" not in result.output and "Traceback" not in result.output


def test_an_internal_error_is_one_line_without_a_python_exception_name(
    spark: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    import lakemerge.demo
    from lakemerge.cli.app import app

    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(lakemerge.demo, "run_demo", broken)
    result = CliRunner().invoke(app, ["demo", "--dir", str(tmp_path / "demo")])
    assert result.exit_code == 1
    last = [line for line in result.output.splitlines() if line.strip()][-1]
    assert last.startswith("internal error: 'boom' (a bug in lakemerge: run with -v for the traceback")
    assert "KeyError" not in result.output
