"""The manual cannot drift from the code: every pipeline key has a description, the references list
every key, command and option, and every TOML and Python example of the README and the manual is
valid. The pages that run as walkthroughs (tests/cli/test_readme.py, tests/cli/test_howto.py) run
their files and Python; here, the fragments of pipeline files are validated and the Python of the
other pages compiles."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main
from pydantic import BaseModel

from lakemerge.cli.app import app
from lakemerge.config.base import Model, attribute_docs
from lakemerge.config.pipeline_file import load_pipeline
from manual import reference
from tests.cli.test_howto import KAFKA as KAFKA_GUIDES
from tests.cli.test_howto import WALKTHROUGHS as GUIDES_RUN
from tests.cli.test_readme import WALKTHROUGHS as README_AND_TUTORIAL
from tests.cli.walkthrough import blocks

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
#: The pages whose files, commands and Python run as a reader follows them.
RUN = {*README_AND_TUTORIAL, *GUIDES_RUN, *KAFKA_GUIDES}


def _blocks(language: str, *, titled: bool) -> list[tuple[str, str]]:
    """The ``language`` blocks of every page, those with a title (a file a walkthrough writes) or
    the others."""
    found = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        found += [(name, b.body) for b in blocks(page.read_text()) if b.lang == language and bool(b.title) == titled]
    return found


def test_every_file_a_page_gives_is_written_by_a_walkthrough() -> None:
    """A block with a title is a file the reader writes: only the pages that run may have them."""
    titled = {str(page.relative_to(ROOT)) for page in PAGES if any(b.title for b in blocks(page.read_text()))}
    assert titled - RUN == set()


def test_every_pipeline_key_has_a_description() -> None:
    assert [(m, f) for m, f, text in reference.described_fields() if not text] == []


def test_a_key_without_a_description_is_found() -> None:
    """The check is real: a model whose docstring leaves a field out has a field without description."""

    class Described(Model):
        """A model.

        Attributes:
            named: described, on
                two lines.
            first / second: both described.
            s3_key: a name with a digit.
        """

        named: int = 0
        first: int = 0
        second: int = 0
        s3_key: int = 0
        forgotten: int = 0

    fields = Described.model_fields
    assert fields["named"].description == "described, on two lines."
    assert fields["first"].description == fields["second"].description == "both described."
    assert fields["s3_key"].description == "a name with a digit."
    assert fields["forgotten"].description is None


def test_every_described_attribute_is_a_field() -> None:
    """No model describes a key it no longer has."""
    stale = []
    for section in reference.sections():
        model: type[BaseModel] = section.model
        stale += [f"{model.__name__}.{n}" for n in attribute_docs(model.__doc__ or "") if n not in model.model_fields]
    assert stale == []


def test_the_pipeline_reference_lists_every_key_with_type_and_default() -> None:
    page = reference.pipeline_page()
    keys = list(reference.keys())
    assert len(keys) > 100
    for key in keys:
        assert f"| `{key.name}` | {key.type} | {key.default} |" in page, key
    schema = next(k for k in keys if k.section == "[tables.NAME.feed]" and k.name == "schema")
    assert schema.field == "schema_ddl" and schema.default == "unset"
    attempts = next(k for k in keys if k.name == "commit_attempts")
    assert (attempts.type, attempts.default) == ("integer (≥ 1)", "`5`")
    assert "## `[[tables.NAME.feeds]]`" not in page and "`[[tables.NAME.feeds]]`" in page


def test_the_source_reference_lists_exactly_the_keys_a_source_takes(tmp_path: Path) -> None:
    """Each key the reference gives a ``[sources.NAME]`` section loads, written with the default it
    shows; the keys a source refuses (inherited from a table's stream) are not listed."""
    from lakemerge.config.source import SourceConfig

    base = {"bootstrap_servers": "127.0.0.1:9092", "topic_pattern": "shop[.].*", "table_path": "{table}"}
    base |= {"checkpoint": "c", "state": "s"}
    every = list(reference.keys())
    listed = [k for k in every if k.section == "[sources.NAME]"]
    assert {"table_path", "include", "defaults", "format", "source"} <= {k.name for k in listed}
    assert not {k.field for k in listed} & set(SourceConfig.REFUSED)
    assert {"schema", "types", "message_key"} & {k.name for k in listed} == set()
    for key in listed:
        assert key.type != '`"kafka"` \\| `"files"`', "a source reads Kafka only"
        if not key.default.startswith("`"):
            continue
        value = tomllib.loads(f"value = {key.default.strip('`')}")["value"]
        pipeline = tmp_path / "pipeline.toml"
        pipeline.write_text(_toml({"sources": {"shop": {**base, key.name: value}}}))
        assert load_pipeline(pipeline).sources["shop"], key


def test_the_command_reference_lists_every_command_and_option() -> None:
    page = reference.cli_page()
    group: Any = typer.main.get_command(app)
    for name, command in group.commands.items():
        assert f"## `lakemerge {name}`" in page
        for param in command.params:
            if param.param_type_name == "option":
                assert f"`{param.opts[0]}`" in page.split(f"## `lakemerge {name}`")[1].split("\n## ")[0], (name, param)


def _completed(data: dict[str, Any]) -> dict[str, Any]:
    """A fragment of a pipeline file made whole: every table a path and a key, every group's tables."""
    tables = data.setdefault("tables", {})
    for group in data.get("groups", {}).values():
        group.setdefault("state", "lake/_groups/g")
        for name in group.get("tables", []):
            tables.setdefault(name, {})
    if not tables:
        tables["example"] = {}
    for name, table in tables.items():
        table.setdefault("path", f"lake/{name}")
        table.setdefault("key", "id")
    return data


@pytest.mark.parametrize(("page", "body"), _blocks("toml", titled=False), ids=lambda v: v if v.endswith(".md") else "")
def test_every_pipeline_fragment_is_valid(page: str, body: str, tmp_path: Path) -> None:
    """A TOML block without a title is part of a pipeline file: made whole, it loads."""
    data = _completed(tomllib.loads(body))
    pipeline = tmp_path / "pipeline.toml"
    pipeline.write_text(_toml(data))
    load_pipeline(pipeline)


@pytest.mark.parametrize(
    ("page", "body"),
    [(page, body) for page, body in _blocks("python", titled=False) if page not in RUN],
    ids=lambda v: v if v.endswith(".md") else "",
)
def test_every_python_example_of_a_page_that_does_not_run_compiles(page: str, body: str) -> None:
    compile(body, page, "exec")


def _toml(data: dict[str, Any], prefix: str = "") -> str:
    """``data`` as TOML (tomllib reads, it does not write)."""
    plain = {k: v for k, v in data.items() if not isinstance(v, dict) and not _tables(v)}
    lines = [f"[{prefix}]"] if prefix and plain else []
    lines += [f"{k} = {_value(v)}" for k, v in plain.items()]
    for k, v in data.items():
        name = f"{prefix}.{_name(k)}" if prefix else _name(k)
        if isinstance(v, dict):
            lines.append(_toml(v, name))
        elif _tables(v):
            lines += [f"[[{name}]]\n" + _toml(item, "").strip() for item in v]
    return "\n".join(lines) + "\n"


def _tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _name(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _value(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_name(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return str(value)


def test_every_heavy_marker_has_a_readme_line_that_runs_it() -> None:
    """Each marker the default run leaves out, and the Connect backend, has its command in the README."""
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    left_out = re.findall(r"not (\w+)", options["addopts"])
    readme = (ROOT / "README.md").read_text()
    assert len(left_out) >= 9
    assert [m for m in left_out if f"python -m pytest -m {m}" not in readme] == []
    assert "python -m pytest --backend connect" in readme
