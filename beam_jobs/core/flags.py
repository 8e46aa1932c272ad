"""The flag table: options dataclasses whose fields carry how they are given.

A field made by `option(...)` is one flag: its name (`--name` on the command line, `name=` as a
keyword of `beam_jobs.convert`), aliases, help text, how command-line text becomes the value
(`parse`) and how a Python value does (`accept`). A field made by `group(Cls)` holds another
options dataclass whose flags count as this one's. From one table come: the argparse flags of
the command line (`add_arguments`), the typed values of the command line and of Python keywords
alike (`values`: text is parsed, Python values are taken as they are, never rendered as text
first), and the options a conversion records in its manifest (`recorded`).
"""

from __future__ import annotations

import dataclasses
import enum
import numbers
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from beam_jobs.core.errors import UsageError

__all__ = [
    "Flag",
    "accept_bool",
    "accept_names",
    "add_arguments",
    "bare_values",
    "check_keywords",
    "find",
    "flags",
    "group",
    "is_absent",
    "number",
    "option",
    "parse_bool",
    "parse_float",
    "parse_int",
    "parse_names",
    "path_value",
    "recorded",
    "switch",
    "texts_joined",
    "values",
    "whole_number",
]

_FLAG = "tfrecord_etl.flag"
_GROUP = "tfrecord_etl.group"


@dataclasses.dataclass(frozen=True)
class Flag:
    """How one option is given.

    Attributes:
      name: `--name` on the command line and `name=` as a Python keyword.
      help: the help text (`--help`, the Dataflow template's parameters).
      parse: command-line text -> the value; raises ValueError (or UsageError) when it cannot.
      accept: a Python value that is not text -> the value; None: only text is taken.
      aliases: other names for it (`--label` for `--label_column`).
      repeated: given once per value (`--input a --input b`); the value is a tuple.
      bare: the text the flag stands for when given without a value (`--overwrite`); on the
        command line such a flag takes a value only as `--flag=value` or a true/false word.
      reading: how inputs are read (`inspect --input` takes it too).
      recorded: part of what a conversion is: recorded in its manifest, compared on a rerun.
      recorded_as: the manifest's key for it, when not the field's name (a key manifests have
        always used, so that a rerun over an older dataset compares like with like).
      metavar: the value's name in `--help`.
      takes_empty: an empty value (`--flag ''`, `flag=[]`) is a value, parsed as any other,
        not "not given" (`--null_values ''`: no markers at all).
    """

    name: str
    help: str
    parse: Callable[[str], Any] = str
    accept: Callable[[Any], Any] | None = None
    aliases: tuple[str, ...] = ()
    repeated: bool = False
    bare: str | None = None
    reading: bool = False
    recorded: bool = True
    recorded_as: str | None = None
    metavar: str | None = None
    takes_empty: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def value(self, given: Any) -> Any:
        """The typed value of what was given: command-line text (a list of texts for a
        repeated flag), or a Python value.

        Raises:
          UsageError: naming the flag and the value.
        """
        try:
            if self.repeated:
                if isinstance(given, (str, os.PathLike)):
                    given = [given]
                elif not isinstance(given, Iterable) or isinstance(given, Mapping):
                    raise TypeError(f"takes a list of values, got {_shown(given)}")
                return tuple(self._one(item) for item in given)
            return self._one(given)
        except UsageError:
            raise
        except (TypeError, ValueError) as e:
            raise UsageError(f"--{self.name} {e}") from None

    def _one(self, given: Any) -> Any:
        if isinstance(given, str):
            return self.parse(given)
        if self.accept is None:
            raise TypeError(f"takes text, got {_shown(given)}")
        return self.accept(given)


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def option(default: Any = None, **flag: Any) -> Any:
    """A dataclass field that is a flag (`Flag`'s attributes as keywords; `name` defaults to
    the field's name)."""
    return dataclasses.field(default=default, metadata={_FLAG: flag})


def switch(default: bool, **flag: Any) -> Any:
    """A `true|false` flag (`option` with the boolean parse and check)."""
    return option(default, parse=parse_bool, accept=accept_bool, **flag)


def group(cls: type) -> Any:
    """A dataclass field holding another options dataclass, whose flags are this one's too."""
    return dataclasses.field(default_factory=cls, metadata={_GROUP: cls})


def is_absent(value: Any) -> bool:
    """Whether a value is empty: None, blank text (`--splits=`), or an empty list or dict
    (`splits={}`). For a flag whose default is empty too, an empty value is "not given"."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return not value
    return False


def _flag_of(field: dataclasses.Field[Any]) -> Flag:
    return Flag(**{"name": field.name, **field.metadata[_FLAG]})


def flags(cls: type) -> list[Flag]:
    """Every flag of an options dataclass, its groups' included, in declaration order."""
    return [flag for _, flag in _walk(cls)]


def _walk(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    for field in dataclasses.fields(cls):
        if _GROUP in field.metadata:
            yield from _walk(field.metadata[_GROUP])
        elif _FLAG in field.metadata:
            yield field, _flag_of(field)


def find(cls: type, name: str) -> Flag | None:
    """The flag called `name` (or one of its aliases), if `cls` has it."""
    return next((f for f in flags(cls) if name in f.names), None)


def check_keywords(cls: type, given: Iterable[str], caller: str, besides: str = "") -> None:
    """Raises UsageError naming each keyword of `given` that is no flag of `cls` (with the
    flag it is closest to); `caller` names the function, `besides` what else it takes."""
    import difflib

    names = sorted({n for f in flags(cls) for n in f.names})
    unknown = sorted(set(given) - set(names))
    if not unknown:
        return
    close = [difflib.get_close_matches(u, names, n=1, cutoff=0.75) for u in unknown]
    hints = [f"{u} (did you mean {c[0]}?)" if c else u for u, c in zip(unknown, close, strict=True)]
    raise UsageError(
        f"{caller} got unknown keyword argument{'s' if len(unknown) > 1 else ''} "
        f"{', '.join(hints)}{besides}"
    )


def values(cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments for `cls(...)`: each field's typed value from `given` (by flag name or
    alias; None or absent: the field's default), groups built the same way.

    Raises:
      UsageError: for a value a flag does not take, or a flag given twice under two names.
    """
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if _GROUP in field.metadata:
            inner = field.metadata[_GROUP]
            kwargs[field.name] = inner(**values(inner, given))
        elif _FLAG in field.metadata:
            flag = _flag_of(field)
            empty_default = is_absent(field.default) and not flag.takes_empty
            named = [
                n
                for n in flag.names
                if given.get(n) is not None and not (empty_default and is_absent(given.get(n)))
            ]
            if len(named) > 1:
                shown = " and ".join(f"--{n}" for n in named)
                raise UsageError(f"{shown} are one flag: give it once")
            if named:
                kwargs[field.name] = flag.value(given[named[0]])
    return kwargs


def recorded(options: Any) -> dict[str, Any]:
    """The recorded flags' values of an options object, as JSON values, by field name."""
    found: dict[str, Any] = {}
    for field in dataclasses.fields(options):
        value = getattr(options, field.name)
        if _GROUP in field.metadata:
            found.update(recorded(value))
        elif _FLAG in field.metadata and (flag := _flag_of(field)).recorded:
            found[flag.recorded_as or field.name] = _json(value)
    return found


def _json(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [_json(getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    return value


class _Parser(Protocol):
    """An argparse parser or argument group."""

    def add_argument(self, *names: str, **options: Any) -> Any: ...


def add_arguments(parser: _Parser, cls: type, only: Callable[[Flag], bool] | None = None) -> None:
    """Adds `cls`'s flags (those `only` keeps) to a parser: each gives its text, or None when
    absent (the dataclass's default then applies). Args pass through `bare_values` first."""
    for flag in flags(cls):
        if only is not None and not only(flag):
            continue
        parser.add_argument(
            *(f"--{n}" for n in flag.names),
            dest=flag.name,
            action="append" if flag.repeated else "store",
            default=None,
            metavar=flag.metavar,
            help=flag.help,
        )


_BOOL_WORDS = ("true", "false", "1", "0", "yes", "no")


def bare_values(argv: Sequence[str], cls: type) -> list[str]:
    """The args with each flag that may stand alone given its value as `--flag=value`: its
    own text when it stands alone, or the true/false word after it (`--overwrite false`).
    Any other word after it is not its value, so a loose word (a glob the shell expanded) is
    reported as one, not taken for the flag's value."""
    bare = {f"--{n}": f.bare for f in flags(cls) if f.bare is not None for n in f.names}
    found: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in bare:
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is not None and following.strip().lower() in _BOOL_WORDS:
                arg, i = f"{arg}={following}", i + 1
            else:
                arg = f"{arg}={bare[arg]}"
        found.append(arg)
        i += 1
    return found


def parse_bool(text: str) -> bool:
    """`true`/`false` (also 1/0, yes/no, any case)."""
    lowered = text.strip().lower()
    if lowered not in _BOOL_WORDS:
        raise ValueError(f"must be true or false, got {text!r}")
    return lowered in ("true", "1", "yes")


def accept_bool(value: Any) -> bool:
    """True or False (NumPy's too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"must be True or False, got {_shown(value)}")
    return bool(value)


def whole_number(value: Any) -> int:
    """An integer (Python's or NumPy's) or a float without a fraction; not a bool."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"must be a whole number, got {_shown(value)}")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(float(value))
    raise TypeError(f"must be a whole number, got {_shown(value)}")


def number(value: Any) -> float:
    """A real number (Python's or NumPy's); not a bool."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"must be a number, got {_shown(value)}")
    if isinstance(value, np.floating):
        return float(str(value))  # np.float32(0.01) means 0.01, not 0.009999999776...
    return float(value)


def parse_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"must be a whole number, got {text!r}") from None


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None


def path_value(value: Any) -> str:
    """A path given as a `pathlib.Path` (or any os.PathLike)."""
    if not isinstance(value, os.PathLike):
        raise TypeError(f"must be a path (text or pathlib.Path), got {_shown(value)}")
    return os.fspath(value)


def parse_names(text: str) -> tuple[str, ...]:
    """`a,b,c` -> ("a", "b", "c"), spaces around each name removed."""
    return tuple(name.strip() for name in text.split(","))


def accept_names(value: Any) -> tuple[str, ...]:
    """A list or tuple of names."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"must be a list of names, got {_shown(value)}")
    return tuple(v.strip() for v in value)


def texts_joined(value: Any) -> str | None:
    """A list of texts as the one comma-separated text the command line takes
    (`["train=80", "eval=20"]` is `train=80,eval=20`); None for anything else."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return None
