"""miles' lane-selection grammar: which GPU lanes a typed expression picks.

Contract (the grammar of miles' web dashboard, ``DashboardStore.resolve_lanes``):

- An expression is comma-separated selectors; the lanes selected are the union of what each selects. An empty
  expression, or exactly ``all``, selects every lane. Empty pieces (``rank:1,,rank:2``) are skipped (commas
  alone select nothing).
- Each selector is ``kind:value``:

  ``rank:5`` / ``rank:0-7``  lanes a train rank ran on (phases of role ``train``)
  ``g:5`` / ``g:0-31``       global lane numbers: the lane's place among all lanes sorted by (node, gpu)
  ``node:<host>``            the lanes of one host, named exactly
  ``gpu:<host>:<index>``     one lane (the host is everything before the last ``:``)
  ``engine:<text>``          lanes of an engine whose address contains the text (``topology.jsonl``)
  ``role:train|rollout``     lanes a train rank ran on / lanes an engine holds
  ``every:<n>``              every n-th global lane number (``g`` divisible by n)

- A selector that is valid but matches nothing selects nothing. Anything else is one
  :class:`LaneGrammarError` naming the selector, its column (1-based) and what it should be, never another
  exception. Stricter than miles in two places, both said in the message: a number is ASCII digits only (at most
  :data:`MAX_DIGITS`), and a range must not run backwards (``rank:7-0``).
- Bounded work on any input: at most :data:`MAX_LENGTH` characters and :data:`MAX_SELECTORS` selectors are
  parsed (longer is an error, not a slow parse), ranges are compared, never expanded, and resolving costs
  selectors × lanes. Pure: no files, no formatting.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from miles_tui.core.telemetry import Lane

MAX_LENGTH: Final = 4096
"""Characters an expression may have."""

MAX_SELECTORS: Final = 256
"""Selectors an expression may have."""

MAX_DIGITS: Final = 9
"""Digits a number may have."""

SELECTOR_KINDS: Final = ("rank", "g", "node", "gpu", "engine", "role", "every")
"""The selector kinds, as miles spells them."""

ROLES: Final = ("train", "rollout")


class LaneGrammarError(ValueError):
    """An expression that is not miles' lane grammar; the message says what and where."""


@dataclass(frozen=True)
class Selector:
    """One ``kind:value`` piece of an expression."""

    kind: str
    """One of :data:`SELECTOR_KINDS`."""
    text: str
    """The piece as typed (trimmed)."""
    low: int = 0
    """``rank``/``g``: the range's first number; ``gpu``: the index; ``every``: the stride."""
    high: int = 0
    """``rank``/``g``: the range's last number (inclusive)."""
    name: str = ""
    """``node``: the host; ``gpu``: the host; ``engine``: the text to find; ``role``: the role."""


@dataclass(frozen=True)
class LaneExpression:
    """A parsed expression: its selectors (none: every lane)."""

    text: str
    """The expression as typed (trimmed)."""
    selectors: tuple[Selector, ...]
    """Its selectors (none and not :attr:`everything`: only commas, which select nothing, as in miles)."""
    everything: bool = False
    """Whether it selects every lane (empty or ``all``)."""


@dataclass(frozen=True)
class LaneFacts:
    """What the grammar can ask about one lane."""

    lane: Lane
    """(node, gpu)."""
    index: int
    """Global lane number (``g``)."""
    ranks: frozenset[int] = frozenset()
    """Train ranks seen on it."""
    roles: frozenset[str] = frozenset()
    """``train`` and/or ``rollout``."""
    engines: tuple[str, ...] = ()
    """Addresses of the engines holding it."""


def parse_lanes(text: str) -> LaneExpression:
    """The expression ``text`` parsed; :class:`LaneGrammarError` says what is wrong and where."""
    if len(text) > MAX_LENGTH:
        raise LaneGrammarError(f"lane expression too long: {len(text)} characters (at most {MAX_LENGTH})")
    stripped = text.strip()
    if stripped in ("", "all"):
        return LaneExpression(stripped, (), everything=True)
    selectors: list[Selector] = []
    column = 1
    for raw in text.split(","):
        token = raw.strip()
        where = column + (len(raw) - len(raw.lstrip()))
        column += len(raw) + 1
        if not token:
            continue
        if len(selectors) == MAX_SELECTORS:
            raise LaneGrammarError(f"too many lane selectors (at most {MAX_SELECTORS})")
        selectors.append(_selector(token, where))
    return LaneExpression(stripped, tuple(selectors))


def _selector(token: str, column: int) -> Selector:
    kind, _, value = token.partition(":")
    shown = _quoted(token)
    if kind not in SELECTOR_KINDS:
        known = ", ".join(f"{k}:" for k in SELECTOR_KINDS)
        raise LaneGrammarError(f"unknown lane selector {_quoted(kind)} in {shown} at column {column}: use {known}")
    if not value:
        raise LaneGrammarError(f"lane selector {shown} at column {column} has no value: expected {kind}:<value>")
    if kind in ("rank", "g"):
        low, high = _range(value, f"{shown} at column {column}")
        return Selector(kind, token, low, high)
    if kind == "every":
        stride = _number(value, f"{shown} at column {column}")
        if stride <= 0:
            raise LaneGrammarError(f"lane selector {shown} at column {column}: the stride must be positive")
        return Selector(kind, token, stride)
    if kind == "gpu":
        node, _, index = value.rpartition(":")
        if not node:
            raise LaneGrammarError(f"lane selector {shown} at column {column}: expected gpu:<node>:<index>")
        return Selector(kind, token, _number(index, f"{shown} at column {column}"), name=node)
    if kind == "role" and value not in ROLES:
        raise LaneGrammarError(f"lane selector {shown} at column {column}: the role must be train or rollout")
    return Selector(kind, token, name=value)


def _quoted(text: str, limit: int = 40) -> str:
    """A piece of the expression for a message: printable, short."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in text)
    return repr(clean if len(clean) <= limit else clean[: limit - 1] + "…")


def _number(text: str, where: str) -> int:
    if not text or len(text) > MAX_DIGITS or not all("0" <= ch <= "9" for ch in text):
        raise LaneGrammarError(f"lane selector {where}: {_quoted(text)} is not a number (digits, at most {MAX_DIGITS})")
    return int(text)


def _range(value: str, where: str) -> tuple[int, int]:
    low_text, dash, high_text = value.partition("-")
    if dash and not high_text:
        raise LaneGrammarError(f"lane selector {where}: a range needs its end, like 0-7")
    low = _number(low_text, where)
    high = _number(high_text, where) if dash else low
    if high < low:
        raise LaneGrammarError(f"lane selector {where}: the range {low}-{high} runs backwards")
    return low, high


def _matches(selector: Selector, facts: LaneFacts) -> bool:
    kind = selector.kind
    if kind == "rank":
        return any(selector.low <= rank <= selector.high for rank in facts.ranks)
    if kind == "g":
        return selector.low <= facts.index <= selector.high
    if kind == "node":
        return str(facts.lane[0]) == selector.name
    if kind == "gpu":
        return str(facts.lane[0]) == selector.name and facts.lane[1] == selector.low
    if kind == "engine":
        return any(selector.name in address for address in facts.engines)
    if kind == "every":
        return facts.index % selector.low == 0
    return selector.name in facts.roles  # role


def resolve_lanes(expression: LaneExpression, facts: Sequence[LaneFacts]) -> tuple[int, ...]:
    """Positions (into ``facts``) of the lanes the expression selects, in ``facts``' order."""
    if expression.everything:
        return tuple(range(len(facts)))
    return tuple(i for i, lane in enumerate(facts) if any(_matches(s, lane) for s in expression.selectors))


def lane_facts(
    lanes: Sequence[Lane],
    train: Iterable[tuple[Any, Any, Iterable[Any]]] = (),
    engines: Mapping[str, Iterable[tuple[Any, Any]]] | None = None,
) -> tuple[LaneFacts, ...]:
    """Facts of ``lanes`` (in their order): global numbers by (node, gpu) as miles sorts them, train ranks from
    ``train`` ((node, rank, gpus) of phases of role train), engines from ``engines`` (address -> its lanes)."""
    ranks: dict[Lane, set[int]] = {}
    for node, rank, gpus in train:
        for gpu in gpus or ():
            spot = ranks.setdefault((node, gpu), set())
            if type(rank) is int and rank >= 0:
                spot.add(rank)
    held: dict[Lane, list[str]] = {}
    for address, where in (engines or {}).items():
        for node, gpu in where:
            held.setdefault((node, gpu), []).append(str(address))
    order = sorted(range(len(lanes)), key=lambda i: (str(lanes[i][0]), _sortable(lanes[i][1])))
    number = {position: index for index, position in enumerate(order)}
    out = []
    for i, lane in enumerate(lanes):
        roles = {"train"} if lane in ranks else set()
        if lane in held:
            roles.add("rollout")
        engines_of = tuple(sorted(held.get(lane, ())))
        out.append(LaneFacts(lane, number[i], frozenset(ranks.get(lane, ())), frozenset(roles), engines_of))
    return tuple(out)


def _sortable(gpu: Any) -> tuple[int, Any]:
    return (0, gpu) if type(gpu) is int else (1, str(gpu))


def engine_lanes(snapshot: Mapping[str, Any] | None) -> dict[str, list[tuple[Any, Any]]]:
    """Address -> lanes of each engine of a ``topology.jsonl`` record (``engines``: addr and [node, gpu] pairs);
    what does not have that shape is left out."""
    out: dict[str, list[tuple[Any, Any]]] = {}
    engines = snapshot.get("engines") if isinstance(snapshot, Mapping) else None
    for engine in engines if isinstance(engines, list) else ():
        if not isinstance(engine, Mapping) or not isinstance(engine.get("addr"), str):
            continue
        pairs = engine.get("gpus")
        lanes = [
            (pair[0], pair[1])
            for pair in (pairs if isinstance(pairs, list) else ())
            if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and type(pair[1]) is int
        ]
        out[engine["addr"]] = lanes
    return out
