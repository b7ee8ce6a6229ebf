"""The package as users get it: the sdist and the wheel built from a clean copy of the checkout, and
fresh virtual environments outside the checkout to install them in."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def clean_copy(target: Path) -> Path:
    """The checkout's files as a clean clone has them (tracked, and new ones git does not ignore):
    no egg-info or build folder of an earlier install, whose file lists setuptools would reuse."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def build(source: Path, out: Path) -> dict[str, Path]:
    """The sdist and the wheel built from it (in an isolated build environment, as pip builds)."""
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    wheels, sdists = list(out.glob("lakemerge-*.whl")), list(out.glob("lakemerge-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


@dataclass(frozen=True)
class Venv:
    """A virtual environment and the environment variables its commands run with (nothing of the
    test process's Python, Spark or lakemerge settings leaks in)."""

    root: Path
    env: dict[str, str]

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    def run(self, command: Sequence[str], *, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        program = str(self.bin / command[0]) if (self.bin / command[0]).exists() else command[0]
        return subprocess.run(
            [program, *command[1:]], cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def install(self, *requirements: str, cwd: Path) -> None:
        done = self.run(["pip", "install", "-q", *requirements], cwd=cwd)
        assert done.returncode == 0, done.stderr[-3000:]


def fresh_venv(root: Path, log: Path) -> Venv:
    """An empty virtual environment at ``root``; Spark's log of its commands goes to ``log``."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYSPARK", "PYTHON", "VIRTUAL_ENV", "SPARK_HOME", "LAKEMERGE", "SPARK_REMOTE"))
    }
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["LAKEMERGE_SPARK_LOG"] = str(log)
    return Venv(root, env)
