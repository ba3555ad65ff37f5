"""What a key's value is: each kind turns the text a file or the environment gave into a typed value, or raises one
ConfigError naming the key, where its value came from and what was expected."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Generic, TypeVar

from venice_core.errors import ConfigError

T = TypeVar("T")


def parse_bool(value: object, what: str) -> bool:
    """`true` or `false`, in any case: the one spelling of a boolean, in the cluster config and in a push's or a
    repush's confs (`allow.empty.input`, `repush.ttl.enable`, ...). ConfigError naming `what` otherwise: a `1`,
    `yes` or typo is refused, not read as false."""
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"{what} must be true or false, got {value!r}")
    return text == "true"


class Kind(Generic[T]):
    """How a key's text becomes its value (`parse`), and how the reference names the type (`name`)."""

    name = "text"

    def parse(self, text: str, what: str) -> T:
        raise NotImplementedError


class Text(Kind[str]):
    def parse(self, text: str, what: str) -> str:
        return text


@dataclass(frozen=True)
class Integer(Kind[int]):
    minimum: int = 0
    name = "integer"

    def parse(self, text: str, what: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{what} must be an integer, got {text!r}") from None
        if value < self.minimum:
            raise ConfigError(f"{what} must be at least {self.minimum}, got {value}")
        return value


@dataclass(frozen=True)
class Seconds(Kind[float]):
    """A positive number (or 0 too, where `zero`: a setting that 0 turns off)."""

    zero: bool = False
    name = "number"

    def parse(self, text: str, what: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ConfigError(f"{what} must be a number, got {text!r}") from None
        if not math.isfinite(value):
            raise ConfigError(f"{what} must be a finite number, got {text!r}")
        if value < 0 or (value == 0 and not self.zero):
            raise ConfigError(f"{what} must be {'0 or more' if self.zero else 'positive'}, got {value}")
        return value


class Flag(Kind[bool]):
    name = "true/false"

    def parse(self, text: str, what: str) -> bool:
        return parse_bool(text, what)


@dataclass(frozen=True)
class Choice(Kind[str]):
    options: tuple[str, ...]

    @property
    def name(self) -> str:  # type: ignore[override]  # a property where the base has a class attribute
        return " / ".join(self.options)

    def parse(self, text: str, what: str) -> str:
        if text not in self.options:
            raise ConfigError(f"{what} must be one of {', '.join(self.options)}, got {text!r}")
        return text


E = TypeVar("E", bound=StrEnum)


@dataclass(frozen=True)
class Member(Kind[E]):
    """A member of a closed set (a StrEnum), read in any case."""

    enum: type[E]

    @property
    def name(self) -> str:  # type: ignore[override]  # a property where the base has a class attribute
        return " / ".join(self.enum)

    def parse(self, text: str, what: str) -> E:
        try:
            return self.enum(text.upper())
        except ValueError:
            raise ConfigError(f"{what} must be one of {', '.join(self.enum)}, got {text!r}") from None


class Words(Kind[tuple[str, ...]]):
    """Space-separated (a JVM's options)."""

    name = "words"

    def parse(self, text: str, what: str) -> tuple[str, ...]:
        return tuple(text.split())


CLASS_PATH = re.compile(r"[A-Za-z_][\w.]*\.[A-Za-z_]\w*")


@dataclass(frozen=True)
class Names(Kind[tuple[str, ...]]):
    """Comma-separated; each a `module.Class` path where `class_paths`."""

    class_paths: bool = False
    name = "comma-separated list"

    def parse(self, text: str, what: str) -> tuple[str, ...]:
        names = tuple(p.strip() for p in text.split(",") if p.strip())
        for name in names if self.class_paths else ():
            if not CLASS_PATH.fullmatch(name):
                raise ConfigError(f"{what} names '{name}', not a module.Class path")
        return names


class Folder(Kind[Path]):
    """An absolute path (a relative one is taken from where the config is loaded, not from where a component that
    reads it runs)."""

    name = "path"

    def parse(self, text: str, what: str) -> Path:
        return Path(text).expanduser().absolute()


@dataclass(frozen=True)
class Optional(Kind[T | None]):
    """Empty: unset (None)."""

    inner: Kind[T]

    @property
    def name(self) -> str:  # type: ignore[override]  # a property where the base has a class attribute
        return self.inner.name

    def parse(self, text: str, what: str) -> T | None:
        return self.inner.parse(text, what) if text else None
