"""The references made from the code: every pipeline key from the configuration models (type,
default and description), every command and option from the command line's Typer app.

The descriptions are the models' own (the ``Attributes:`` sections of their docstrings, read into
each field's description) and the commands' help texts, so that the manual cannot say what the code
does not do.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

#: Fields of the models that are not keys of a pipeline file: filled in by the loader.
NOT_KEYS = {("PipelineConfig", "source"), ("TableConfig", "name"), ("SourceConfig", "tables")}
#: Each model may declare, as ``REFUSED``, the fields it inherits and refuses as keys (a source's
#: ``schema``, taken from the events): they are not keys of its section.
#: Fields spelled otherwise in a pipeline file.
SPELLED = {("TableConfig", "more_feeds"): "feeds"}
#: How a section's name is written where a pipeline names it (a table, a group).
NAMED = "NAME"


@dataclass(frozen=True)
class Key:
    """One key of a pipeline file."""

    section: str
    name: str
    type: str
    default: str
    description: str
    model: str
    field: str


@dataclass(frozen=True)
class Section:
    """A TOML table of a pipeline file (``[tables.NAME.feed]``) and the model that reads it."""

    title: str
    model: type[BaseModel]
    doc: str
    #: The other places the same section is written (a feed as ``[[tables.NAME.feeds]]``).
    also: list[str]


def sections() -> list[Section]:
    """Every section of a pipeline file, in reading order (a parent before its children)."""
    from lakemerge.config.pipeline import PipelineConfig

    found: list[Section] = []
    _walk(PipelineConfig, "", found)
    return found


def keys() -> Iterator[Key]:
    """Every key of every section, with its type, default and description."""
    for section in sections():
        for name, field in section.model.model_fields.items():
            if not _is_key(section.model, name) or _child(field.annotation) is not None:
                continue
            shown = _type(field.annotation, field.metadata)
            if name in _one_or_many(section.model):
                shown = shown.replace("list of strings", "string or list of strings")
            yield Key(
                section=section.title,
                name=field.alias or name,
                type=shown,
                default=_default(field),
                description=_markdown(field.description or ""),
                model=section.model.__name__,
                field=name,
            )


def described_fields() -> Iterator[tuple[str, str, str | None]]:
    """Every field of every model a pipeline file reaches: ``(model, field, description)``."""
    for section in sections():
        for name, field in section.model.model_fields.items():
            if name not in getattr(section.model, "REFUSED", {}):
                yield section.model.__name__, name, field.description


def pipeline_page() -> str:
    """The pipeline file's reference, in Markdown."""
    lines = [
        "# Pipeline file reference",
        "",
        "Every key of a pipeline file (TOML), as lakemerge's configuration models read it: its type, its",
        "default and what it does. This page is made from the models when the manual is built; an unknown",
        "key is an error naming it. `NAME` stands for a table's, a group's or a source's name.",
        "",
        "The user's settings file (`$LAKEMERGE_CONFIG`, else `~/.config/lakemerge/config.toml`) holds a",
        "`[spark]` section alone, with the keys below; a pipeline's `[spark]` is laid over it (its keys",
        "win, `conf` settings merge, `packages` add up), and `--master` / `--remote` over both.",
        "",
    ]
    by_section: dict[str, list[Key]] = {}
    for key in keys():
        by_section.setdefault(key.section, []).append(key)
    for section in sections():
        lines += [f"## `{section.title}`", "", _markdown(" ".join(section.doc.split())), ""]
        if section.also:
            lines += ["Also written " + ", ".join(f"`{t}`" for t in section.also) + ", with the same keys.", ""]
        rows = by_section.get(section.title, [])
        if not rows:
            continue
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        lines += [f"| `{k.name}` | {k.type} | {k.default} | {_cell(k.description)} |" for k in rows]
        lines.append("")
    return "\n".join(lines)


def cli_page() -> str:
    """The command line's reference, in Markdown: every command, its arguments and options."""
    import typer.main

    from lakemerge.cli.app import app

    group: Any = typer.main.get_command(app)
    lines = [
        "# Command-line reference",
        "",
        "Every command of `lakemerge`, its arguments and options, from the command line itself (each",
        "is also shown by `lakemerge COMMAND --help`). Exit codes: `0` success, `1` internal error,",
        "`2` configuration or usage error, `3` input error, `4` gave up on conflicts, `130` interrupted.",
        "",
        "```text",
        "lakemerge [--version] [--help] COMMAND [ARGS]...",
        "```",
        "",
    ]
    for name, command in group.commands.items():
        lines += _command(name, command)
    return "\n".join(lines)


def _command(name: str, command: Any) -> list[str]:
    ctx = command.context_class(command, info_name=name)
    summary, *more = (command.help or "").split("\n\n")
    lines = [f"## `lakemerge {name}`", "", " ".join(summary.split()), ""]
    for paragraph in more:
        if paragraph.startswith("\b"):
            lines += ["```text", paragraph.removeprefix("\b").strip("\n"), "```", ""]
        else:
            lines += [" ".join(paragraph.split()), ""]
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines += ["```text", f"lakemerge {name} {usage}", "```", ""]
    lines += ["| argument or option | value | default | description |", "|---|---|---|---|"]
    for param in command.params:
        flags = ", ".join(f"`{o}`" for o in (*param.opts, *param.secondary_opts))
        if param.param_type_name == "argument":
            flags = f"`{param.name.upper()}`" + ("…" if param.nargs != 1 else "")
        flag = bool(getattr(param, "is_flag", False))
        value = "" if flag else _cli_type(param, ctx)
        default = "" if flag or param.default in (None, (), []) else f"`{param.default}`"
        if param.required:
            default = "required"
        lines.append(f"| {flags} | {value} | {default} | {_cell(getattr(param, 'help', None) or '')} |")
    return [*lines, ""]


def _cli_type(param: Any, ctx: Any) -> str:
    shown = param.display_type(ctx) if hasattr(param, "display_type") else f"<{param.type.name}>"
    return f"`{shown}`" + (", repeatable" if getattr(param, "multiple", False) else "")


def _walk(model: type[BaseModel], prefix: str, found: list[Section]) -> None:
    seen = next((s for s in found if s.model is model), None)
    if seen is not None:
        seen.also.append(prefix)
        return
    if prefix:
        found.append(Section(title=prefix, model=model, doc=(model.__doc__ or "").split("\n\n")[0], also=[]))
    for name, field in model.model_fields.items():
        child = _child(field.annotation)
        if child is None or (model.__name__, name) in NOT_KEYS:
            continue
        kind, sub = child
        key = SPELLED.get((model.__name__, name), field.alias or name)
        path = f"{_bare(prefix)}.{key}" if prefix else key
        if kind == "named":
            title = f"[{path}.{NAMED}]"
        elif kind == "list":
            title = f"[[{path}]]"
        else:
            title = f"[{path}]"
        _walk(sub, title, found)


def _is_key(model: type[BaseModel], field: str) -> bool:
    """Whether ``field`` of ``model`` is a key of its section: not filled in by the loader, nor
    refused by the model."""
    return (model.__name__, field) not in NOT_KEYS and field not in getattr(model, "REFUSED", {})


def _one_or_many(model: type[BaseModel]) -> set[str]:
    """The fields whose model takes one string for a list of one (its ``_one_or_many`` validator)."""
    validators = model.__pydantic_decorators__.field_validators
    return {f for name, v in validators.items() if name == "_one_or_many" for f in v.info.fields}


def _bare(title: str) -> str:
    return title.strip("[]")


def _child(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """Whether a field holds a section: ``("one" | "list" | "named", model)``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "one", annotation
    if origin in (typing.Union, types.UnionType):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        return ("one", models[0]) if models else None
    if origin is tuple and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return "list", args[0]
    if origin is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return "named", args[1]
    return None


def _type(annotation: Any, metadata: list[Any]) -> str:
    shown = _type_name(annotation)
    bounds = []
    for item in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            if getattr(item, attr, None) is not None:
                bounds.append(f"{sign} {getattr(item, attr)}")
    return shown + (f" ({', '.join(bounds)})" if bounds else "")


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f'`"{a}"`' for a in args)
    if origin in (typing.Union, types.UnionType):
        shown = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(shown)
    if origin is tuple:
        return f"list of {_plural(args[0])}"
    if origin is dict:
        return f"table of {_plural(args[1])}"
    if isinstance(annotation, type) and typing.get_origin(annotation) is None:
        return {"str": "string", "bool": "boolean", "int": "integer", "float": "number"}.get(
            annotation.__name__, annotation.__name__
        )
    aliased = getattr(annotation, "__value__", None)
    return _type_name(aliased) if aliased is not None else str(annotation)


def _plural(annotation: Any) -> str:
    shown = _type_name(annotation)
    return {"string": "strings", "integer": "integers", "boolean": "booleans", "number": "numbers"}.get(shown, shown)


def _default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    return f"`{_toml(value)}`"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }" if value else "{}"
    return str(value)


def _markdown(text: str) -> str:
    """reStructuredText's inline code and roles as Markdown."""
    text = re.sub(r":(?:class|func|meth|data|mod|attr):`~?([^`]+)`", lambda m: f"`{m[1].split('.')[-1]}`", text)
    return text.replace("``", "`")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")
