"""One registry primitive for everything bertforge looks up by name: tasks, input formats, model families and the
encoder's variants (position schemes, attention biases, feed-forward and norm kinds).

    FEED_FORWARDS = Registry("feed-forward kind", FeedForwardKind)
    FEED_FORWARDS.register(record)      a record with a `name`; a name taken already is refused
    FEED_FORWARDS.get("glu")            the record, or one line (a UserError) that lists the choices
    "glu" in FEED_FORWARDS, list(FEED_FORWARDS), FEED_FORWARDS.records()
    resolve("bertforge.model.blocks:GatedFeedForward")    what a record names, imported on first use

A built-in record names its code as "module:name" so that reading a registry (the CLI's choices, a config's
check) imports nothing heavy; `resolve` imports it when it is first used. Your own record may hold the object
itself. Registering is the same verb for every kind, from the package and from your code alike.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from .errors import UserError

Record = TypeVar("Record")


class Registry(Generic[Record]):
    """Records of one kind by name, in the order registered (the order the CLI lists them in)."""

    def __init__(
        self,
        kind: str,
        record_type: type,
        check: Callable[[Any, Registry], None] | None = None,
        name_of: Callable[[Any], str] = lambda record: record.name,
    ):
        self.kind = kind  # what a message calls one ("task", "format", "position scheme")
        self.record_type = record_type
        self._check = check  # (record, registry) -> None, or a UserError saying why the record would not work
        self._name_of = name_of
        self._records: dict[str, Record] = {}

    def register(self, record: Record) -> Record:
        """Make `record` a choice everywhere at once. A record that would not work is refused now, with one line
        (a UserError): one of another type, a name already taken (a built-in's as any other), and what the
        kind's own check finds (a format's suffix taken, a task's class that names nothing)."""
        if not isinstance(record, self.record_type):
            raise UserError(f"a {self.kind} is registered as a {self.record_type.__name__}, not {record!r}")
        name = self._name_of(record)
        if isinstance(name, str) and name in self._records:
            raise UserError(f"a {self.kind} named {name!r} is registered already; give yours another name")
        if self._check is not None:
            self._check(record, self)
        if not isinstance(name, str) or not name.strip() or name != name.strip():
            raise UserError(f"a {self.kind} needs a name without surrounding spaces, not {name!r}")
        self._records[name] = record
        return record

    def unregister(self, name: str) -> Record:
        """Take a record out again (a test's, a notebook's experiment) and return it."""
        self.get(name)
        return self._records.pop(name)

    def get(self, name: str) -> Record:
        if name not in self._records:
            raise UserError(f"unknown {self.kind} {name!r}; choose one of {', '.join(self._records)}")
        return self._records[name]

    __getitem__ = get

    def records(self) -> list[Record]:
        return list(self._records.values())

    def copy(self) -> Registry[Record]:
        """Another registry with the same records, for a test to register into and forget."""
        other = Registry(self.kind, self.record_type, self._check, self._name_of)
        other._records = dict(self._records)
        return other

    def __contains__(self, name: object) -> bool:
        return name in self._records

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._records))

    def __len__(self) -> int:
        return len(self._records)


def resolve(target: str | Any, package: str = "bertforge") -> Any:
    """The object a record names: "module:name" (the module absolute, or relative to `package` when it starts with
    a dot) imported on first use; anything else is the object itself."""
    if not isinstance(target, str):
        return target
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module, package), name)
    except (ImportError, AttributeError, ValueError, TypeError):
        raise UserError(f"{target!r} names nothing importable (module:name)") from None
