"""Command-line flags from a typed config dataclass, so a default, a choice or a help text has one home.

Each field becomes ``--field-name``; its ``metadata`` may give ``help``, ``choices``, ``metavar`` and
``env`` (an environment variable that overrides the field's default, read when the parser is built) and
``const`` (the flag's value may then be left out, e.g. ``--ray`` alone for ``--ray local``).
A ``bool`` field is a switch; a field without a default is a required flag; ``metadata["positional"]``
makes a field an operand instead of a flag. A ``dict`` field is a
repeatable ``KEY=VALUE`` flag (``metadata["flag"]`` may name it, e.g. ``--engine-arg`` for
``engine_args``): each VALUE is read as JSON where it parses (``512``, ``true``, ``{"a": 1}``) and kept
as a string where it does not.

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
>>> @dataclasses.dataclass
... class WithDict:
...     engine_args: dict = dataclasses.field(default_factory=dict, metadata={"flag": "--engine-arg"})
>>> parser = argparse.ArgumentParser()
>>> add_flags(parser, WithDict)
>>> config = from_args(WithDict, parser.parse_args(["--engine-arg", "max_model_len=512",
...     "--engine-arg", "enforce_eager=true", "--engine-arg", "quantization=fp8"]))
>>> config
WithDict(engine_args={'max_model_len': 512, 'enforce_eager': True, 'quantization': 'fp8'})
>>> to_argv(config)
['--engine-arg', 'max_model_len=512', '--engine-arg', 'enforce_eager=true', '--engine-arg', 'quantization=fp8']
>>> from_args(WithDict, parser.parse_args([]))
WithDict(engine_args={})
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

T = TypeVar("T")
# The one redaction rule (help text, logs, reprs, error messages), for a URL of any scheme and for KEY=VALUE text:
# the password of ``scheme://user:password@host`` (up to the last "@" before the path), and the value of every
# ``?name=``/``&name=``/``;name=``/`` name=`` whose name looks like a credential (``?password=``, ``&token=``,
# ``sslpassword=``, ``hftoken=``), and a Hub token by its form (``hf_`` and 30+ letters).
_CREDENTIAL_URL = re.compile(r"//([^/@\s:]*):[^/\s]*@")
_KEY_VALUE = re.compile(r"(^|[?&;,\s])([\w.%-]+)=([^&#;,\s]*)")
_HUB_TOKEN = re.compile(r"\bhf_[A-Za-z0-9]{30,}\b")
# A credential's name, in any case or spelling: a part (split at non-letters) ending in token/key/auth
# (``hf_token``, ``hftoken``, ``HF_HUB_ACCESSTOKEN``, ``apiKey``, ``oauth``), or holding password/passwd/
# passphrase/secret/credential anywhere (``TCMQA_DBPASSWORD``, ``TCMQA_SECRETS``); ``max_num_batched_tokens``
# and ``tokenizer`` are no credentials.
_SECRET_PART = re.compile(r"(?:token|key|auth)$|^pat$")
_SECRET_WORD = re.compile(r"pass(?:word|wd|phrase)|secret|credential|authoriz|cookie|signature")


def _secret_name(name: str) -> bool:
    text = unquote(name).lower()
    return bool(_SECRET_WORD.search(text) or any(_SECRET_PART.search(part) for part in re.split(r"[^a-z]+", text)))


def redact(text: str) -> str:
    """``text`` with every credential in it replaced by ``***``: a URL's password, a credential-named query or
    ``KEY=VALUE`` parameter's value, a Hub token (the one rule for help text, logs, reprs and errors).

    >>> redact("postgresql://u:pw@h/db and postgresql://u@h/db?sslmode=require&password=X")
    'postgresql://u:***@h/db and postgresql://u@h/db?sslmode=require&password=***'
    """
    text = _CREDENTIAL_URL.sub(r"//\1:***@", text)
    text = _KEY_VALUE.sub(lambda m: f"{m[1]}{m[2]}=***" if _secret_name(m[2]) and m[3] else m[0], text)
    return _HUB_TOKEN.sub("hf_***", text)


def looks_secret(name: str, value: object = "") -> bool:
    """Whether an option or variable carries a credential: a name like ``hf_token``/``API_KEY``/``DBPASSWORD``
    (but not ``max_num_batched_tokens``), or a value with a credential in it (:func:`redact` changes it)."""
    return _secret_name(name) or redact(str(value)) != str(value)


def _credential_paths(value: Any, path: str) -> Iterator[str]:
    """The paths (``x.hf_token``, ``urls[1]``) in a nested engine arg whose name or text looks like a credential."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            inner = f"{path}.{key}"
            yield from [inner] if _secret_name(str(key)) else _credential_paths(item, inner)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _credential_paths(item, f"{path}[{i}]")
    elif looks_secret("", value):
        yield path


def refuse_credentials(engine_args: Mapping[str, Any]) -> None:
    """Refuse engine args that look like credentials, in any nesting (a key like ``hf_token`` in a dict in a
    list, a value with ``?token=`` or ``user:password@``): the results row records every engine arg and the
    leaderboard publishes it. The one rule for ``tcmqa eval``, ``tcmqa worker`` and the worker's check of the
    row a harness wrote. The message names where, never the value."""
    secret = [path for key, value in engine_args.items() for path in _credential_paths({key: value}, "")]
    if secret:
        raise ValueError(
            f"--engine-arg {', '.join(p.removeprefix('.') for p in secret)}: looks like a credential, and engine "
            "args are published with every results row; give the engine its credentials in the environment "
            "instead (HF_TOKEN; a worker's harness gets TCMQA_HF_READ_TOKEN for gated models)"
        )


def _scalar(annotation: Any) -> Any:
    """``int | None`` -> ``int``; the type argparse converts a flag's text with."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        annotation = args[0]
    return annotation


def parse_key_value(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> ``(KEY, VALUE read as JSON, or the text itself where it is not JSON)``.

    >>> parse_key_value("tensor_parallel_size=2"), parse_key_value("device_map=auto")
    (('tensor_parallel_size', 2), ('device_map', 'auto'))
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def format_key_value(key: str, value: Any) -> str:
    """The ``KEY=VALUE`` text that :func:`parse_key_value` reads back as ``(key, value)``."""
    if isinstance(value, str) and parse_key_value(f"{key}={value}")[1] == value:
        return f"{key}={value}"
    return f"{key}={json.dumps(value)}"


class _KeyValueAction(argparse.Action):
    """Collects repeated ``KEY=VALUE`` flags into one dict (a later KEY replaces an earlier one)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        key, value = values
        setattr(namespace, self.dest, {**(getattr(namespace, self.dest, None) or {}), key: value})


def _is_dict(kind: Any) -> bool:
    return kind is dict or typing.get_origin(kind) is dict


def _flag(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = ()) -> None:
    """Add one flag per field of the dataclass ``cls`` (except ``skip``)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        meta = dict(field.metadata)
        flag = _flag(field)
        kind = _scalar(hints[field.name])
        if _is_dict(kind):
            parser.add_argument(
                flag,
                action=_KeyValueAction,
                type=parse_key_value,
                default={},
                dest=field.name,
                metavar=meta.get("metavar", "KEY=VALUE"),
                help=meta.get("help"),
            )
            continue
        default = field.default if field.default is not dataclasses.MISSING else None
        if "env" in meta and os.environ.get(meta["env"]):
            default = kind(os.environ[meta["env"]])
        kwargs: dict[str, Any] = {"help": meta.get("help"), "dest": field.name}
        if meta.get("positional"):  # an operand, e.g. ``tcmqa probe RUN_DIR``
            parser.add_argument(field.name, type=Path if kind is Path else kind, help=meta.get("help"),
                                metavar=meta.get("metavar", field.name.upper()))  # fmt: skip
            continue
        if kind is bool:  # a switch; one on by default (from the environment) can be turned off with --no-...
            on = field.default_factory() if field.default_factory is not dataclasses.MISSING else bool(field.default)
            action = argparse.BooleanOptionalAction if on else "store_true"
            parser.add_argument(flag, action=action, default=on, **kwargs)
            continue
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        kwargs.update(type=Path if kind is Path else kind, default=default, required=required and default is None)
        for key in ("choices", "metavar"):
            if key in meta:
                kwargs[key] = meta[key]
        if "const" in meta:  # a flag whose value may be left out
            kwargs.update(nargs="?", const=meta["const"])
        if default is not None and kwargs["help"]:
            kwargs["help"] += f" (default: {redact(str(default))})"
        parser.add_argument(flag, **kwargs)


def from_args(cls: type[T], args: argparse.Namespace, **overrides: Any) -> T:
    """The config the parsed flags describe; fields without a flag keep their defaults."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)}
    return cls(**{**values, **overrides})


def to_argv(config: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """The flags that rebuild ``config`` (fields left at None, False or an empty dict are left out, and ``skip``:
    a secret such as the store URL goes to a child in its environment, never on its command line)."""
    argv: list[str] = []
    for field in dataclasses.fields(config):
        if field.name in skip:
            continue
        value = getattr(config, field.name)
        flag = _flag(field)
        if field.metadata.get("positional"):
            argv.append(str(value))
        elif isinstance(value, dict):
            for key, item in value.items():
                argv += [flag, format_key_value(key, item)]
        elif value is True:
            argv.append(flag)
        elif value is not None and value is not False:
            argv += [flag, str(value)]
    return argv
