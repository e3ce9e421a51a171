"""The shapes of metrics.jsonl records seen so far, and a decoder that reads lines of those shapes straight into
numbers: no key strings, no dict per line.

Contract:

- :class:`Shapes` learns, per step key, the metric names its records carried
  (:meth:`Shapes.learn`, from lines the general decoder read) and builds one
  msgspec decoder for all of them: a union of record types tagged by
  ``step_key``, each with one field per metric name (missing: NaN) that takes a
  JSON int or float only, and no metric name it has not learned.
- :meth:`Shapes.decode` returns a :class:`Shaped` record (``step_key`` is its
  type's :attr:`Shaped.step_key`), or raises ``msgspec.DecodeError`` for every
  line not of a learned shape: a step key or a metric name not learned, a
  metric value that is not a number (null, NaN/Infinity literals, a string ...),
  a ``ts`` or ``step`` that is not a number, a field missing, malformed JSON.
  The caller decodes those the general way. Whatever it accepts equals what
  ``json.loads`` gives for the line (duplicate keys: the last wins), with every
  metric it lacks NaN. A metric value is never NaN otherwise: JSON has no NaN
  number, and a number beyond a float64's range is refused.
- Learning is bounded: at most :data:`MAX_WIDTH` names per step key,
  :data:`MAX_STEP_KEYS` step keys and :data:`MAX_BUILDS` builds per process;
  past that, lines of new shapes go the general way (slower, never wrong).
- :meth:`Shaped.numbers` packs records of one type into a float64 matrix, a row
  per record, a column per name of :meth:`names`.
"""

from __future__ import annotations

import math
import re
import struct
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import starmap
from operator import attrgetter
from typing import Any, ClassVar, Final, Union

import msgspec
import numpy as np
import numpy.typing as npt
from msgspec.structs import astuple

MAX_WIDTH: Final = 256
"""Metric names learned per step key (a record type packs every one of them, present or not)."""

MAX_STEP_KEYS: Final = 64
MAX_BUILDS: Final = 256
"""Decoders built per process (one per shape change): a file whose every line brings a new name stops paying."""

_MISSING: Final = math.nan
_MATCHABLE: Final = re.compile(r'[^"\\\x00-\x1f]*')
"""A name msgspec can match a key against: no quote, backslash or control character (the step key too)."""
_metrics_of = attrgetter("metrics")


class Shaped(msgspec.Struct, gc=False):
    """A record of a learned shape (subclasses add ``metrics``; the tag is its step key)."""

    ts: int | float
    step: int | float

    step_key: ClassVar[str]
    names: ClassVar[tuple[str, ...]]
    packer: ClassVar[struct.Struct]

    @classmethod
    def numbers(cls, records: Sequence[Shaped]) -> npt.NDArray[np.float64]:
        """The metric values of ``records`` (all of this type): a row each, NaN where missing. OverflowError for an
        integer beyond a float64's range."""
        try:
            packed = b"".join(starmap(cls.packer.pack, map(astuple, map(_metrics_of, records))))
        except struct.error as err:  # the one value an int | float field holds that does not pack
            raise OverflowError("an integer beyond a float64's range") from err
        return np.frombuffer(packed, np.float64).reshape(len(records), len(cls.names))


class Unshaped(Shaped, tag="\x00miles-tui: no shape", tag_field="step_key"):
    """A union member no line should match; decoding a line to it means the general way (a union needs two)."""


class Shapes:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, dict[str, None]] = {}
        self._types: dict[str, type[Shaped]] = {}
        self.builds = 0
        self.decode: Callable[[bytes], Shaped] = msgspec.json.Decoder(Unshaped).decode

    def learn(self, step_key: str, names: Iterable[str]) -> None:
        """A record of ``step_key`` carried metrics ``names``: lines like it decode the fast way from now on.

        Never raises: a shape that cannot be learned (too wide, a name msgspec cannot match: one holding a quote,
        a backslash or a control character) leaves its lines to the general way."""
        known = self._names.get(step_key)
        if known is not None and known.keys() >= set(names):
            return
        with self._lock:
            if self.builds >= MAX_BUILDS or (known is None and len(self._names) >= MAX_STEP_KEYS):
                return
            merged = dict(known or {})
            merged.update(dict.fromkeys(names))
            if len(merged) > MAX_WIDTH or not all(
                type(n) is str and _MATCHABLE.fullmatch(n) for n in (*merged, step_key)
            ):
                return
            self.builds += 1
            try:
                types = {**self._types, step_key: _record_type(step_key, tuple(merged), self.builds)}
                members = (Unshaped, *types.values())
                decode = msgspec.json.Decoder(Union[members]).decode  # noqa: UP007
            except Exception:  # a shape msgspec will not build: its lines go the general way
                return
            self._names[step_key], self._types, self.decode = merged, types, decode


def _record_type(step_key: str, names: tuple[str, ...], build: int) -> type[Shaped]:
    fields = [(f"m{i}", int | float, _MISSING) for i in range(len(names))]
    metrics = msgspec.defstruct(
        f"Metrics{build}",
        fields,
        rename=dict(zip((f for f, _, _ in fields), names, strict=True)),
        forbid_unknown_fields=True,
        gc=False,
    )
    record = msgspec.defstruct(
        f"Record{build}", [("metrics", metrics)], bases=(Shaped,), tag=step_key, tag_field="step_key", gc=False
    )
    assert issubclass(record, Shaped)
    record.step_key = step_key
    record.names = names
    record.packer = struct.Struct(f"<{len(names)}d")
    return record


SHAPES: Final = Shapes()
"""This process's shapes (each worker process learns its own)."""


def names_of(values: Any) -> list[str] | None:
    """The metric names of a decoded ``metrics`` object when all its values are plain numbers, else None."""
    if all(type(v) is float or type(v) is int for v in values.values()):
        return list(values)
    return None
