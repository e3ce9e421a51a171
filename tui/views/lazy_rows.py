"""A table's rows: each a stable key and its formatted cells, kept whole or formatted only when drawn.

Contract: :class:`TableRow` is one row (key, cells, style); :class:`LazyRows` is a sequence of rows
known by key that formats a row the first time it is asked for and remembers it (up to 8,192 rows),
so a table of a long run formats only what is drawn. ``forget`` drops rows whose content changed.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import overload

from rich.text import Text


@dataclass(frozen=True)
class TableRow:
    """One row: a stable key and its already-formatted cells."""

    key: Hashable
    """Stable identity (a sample index, a step id)."""
    cells: tuple[Text, ...]
    """One Text per column."""
    style: str = ""
    """A style for the whole row (e.g. dim for removed samples)."""


class LazyRows(Sequence[TableRow]):
    """Rows known by key, formatted only when drawn (and then remembered)."""

    def __init__(self, keys: Sequence[Hashable], render: Callable[[Hashable], TableRow]) -> None:
        self.keys = keys
        self._render = render
        self._cache: dict[Hashable, TableRow] = {}

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, index: int) -> TableRow: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TableRow]: ...

    def __getitem__(self, index: int | slice) -> TableRow | Sequence[TableRow]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        key = self.keys[index]
        row = self._cache.get(key)
        if row is None:
            if len(self._cache) > 8192:
                self._cache.clear()
            row = self._cache[key] = self._render(key)
        return row

    def forget(self, keys: Iterable[Hashable]) -> None:
        """Format these rows again when next drawn (their content changed)."""
        for key in keys:
            self._cache.pop(key, None)
