"""Command-line flags from a typed config dataclass, so a default, a choice or a help text has one home.

Each field becomes ``--field-name``; its ``metadata`` may give ``help``, ``choices``, ``metavar`` and
``env`` (an environment variable that overrides the field's default, read when the parser is built).
A ``bool`` field is a switch; a field without a default is a required flag.

>>> import argparse, dataclasses
>>> @dataclasses.dataclass
... class Demo:
...     model: str = dataclasses.field(metadata={"help": "a model"})
...     limit: int | None = None
...     resume: bool = False
>>> parser = argparse.ArgumentParser()
>>> add_flags(parser, Demo)
>>> from_args(Demo, parser.parse_args(["--model", "m", "--limit", "3", "--resume"]))
Demo(model='m', limit=3, resume=True)
>>> to_argv(Demo(model="m", limit=3, resume=True))
['--model', 'm', '--limit', '3', '--resume']
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def _scalar(annotation: Any) -> Any:
    """``int | None`` -> ``int``; the type argparse converts a flag's text with."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    return annotation


def add_flags(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = ()) -> None:
    """Add one flag per field of the dataclass ``cls`` (except ``skip``)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        meta = dict(field.metadata)
        flag = "--" + field.name.replace("_", "-")
        kind = _scalar(hints[field.name])
        default = field.default if field.default is not dataclasses.MISSING else None
        if "env" in meta and os.environ.get(meta["env"]):
            default = kind(os.environ[meta["env"]])
        kwargs: dict[str, Any] = {"help": meta.get("help"), "dest": field.name}
        if kind is bool:
            parser.add_argument(flag, action="store_true", **kwargs)
            continue
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        kwargs.update(type=Path if kind is Path else kind, default=default, required=required and default is None)
        for key in ("choices", "metavar"):
            if key in meta:
                kwargs[key] = meta[key]
        if default is not None and kwargs["help"]:
            kwargs["help"] += f" (default: {default})"
        parser.add_argument(flag, **kwargs)


def from_args(cls: type[T], args: argparse.Namespace, **overrides: Any) -> T:
    """The config the parsed flags describe; fields without a flag keep their defaults."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**values, **overrides})


def to_argv(config: Any) -> list[str]:
    """The flags that rebuild ``config`` (fields left at None or False are left out)."""
    argv: list[str] = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        flag = "--" + field.name.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return argv
