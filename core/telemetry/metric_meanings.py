"""What each metric key miles logs means: one line of fact per key or key family, with where miles computes it.

Contract:

- :func:`metric_meaning` gives the one-line description of a metric key, or None when the key is not one this
  table knows (a key miles-tui could not trace to the code that computes it has no entry: no description is
  ever guessed).
- A key family with a variable part is one entry whose template names it in braces: ``{stat}`` is one of
  ``mean median max min`` (miles' ``compute_statistics``), ``{n}`` a decimal number, ``{name}`` one path segment
  (no ``/``). Exact keys are looked up first, then templates in table order (specific before general).
- ``eval/{name}/X`` is described as the rollout-side sample metric ``rollout/X`` of the eval set ``{name}``
  (miles logs the same computation under both prefixes).
- ``dump/*`` keys are the monitor's own step figures (charted when a run has no metrics.jsonl), described from
  :mod:`miles_tui.core.dump.summary`.
- Each entry names the miles source file (paths in the radixark/miles repository) or miles-tui module it was
  read from; ``tests/core/test_metric_meanings.py`` checks one key per family.

Pure: no I/O.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Final

from miles_tui.core.telemetry.metric_meaning_perf import PERF_MEANINGS, TIMERS
from miles_tui.core.telemetry.metric_meaning_table import MEANINGS, SAMPLE_METRICS, MetricMeaning

__all__ = ["metric_meaning", "metric_source"]

_PARTS: Final = {
    "stat": "(?P<stat>mean|median|max|min)",
    "n": "(?P<n>[0-9]+)",
    "name": "[^/]+?",
    "timer": f"(?P<timer>{'|'.join(TIMERS)})",
}
_PLACEHOLDER: Final = re.compile(r"\{(stat|n|name|timer)\}")


@cache
def _compile(template: str) -> re.Pattern[str]:
    """The full-match regex of a template (literal text escaped, placeholders per :data:`_PARTS`)."""
    pieces: list[str] = []
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        pieces.append(re.escape(template[last : match.start()]))
        pieces.append(_PARTS[match.group(1)])
        last = match.end()
    pieces.append(re.escape(template[last:]))
    return re.compile("".join(pieces))


def _is_template(template: str) -> bool:
    return _PLACEHOLDER.search(template) is not None


def _with_prefix(prefix: str, entries: tuple[MetricMeaning, ...]) -> tuple[MetricMeaning, ...]:
    return tuple(MetricMeaning(prefix + entry.template, entry.meaning, entry.source) for entry in entries)


@cache
def _tables() -> tuple[dict[str, MetricMeaning], tuple[tuple[re.Pattern[str], MetricMeaning], ...]]:
    """Exact keys, and the templates' compiled patterns in lookup order."""
    entries = (*_with_prefix("rollout/", SAMPLE_METRICS), *MEANINGS, *PERF_MEANINGS)
    exact = {entry.template: entry for entry in entries if not _is_template(entry.template)}
    patterns = tuple((_compile(entry.template), entry) for entry in entries if _is_template(entry.template))
    return exact, patterns


def _match(key: str, candidates: tuple[tuple[re.Pattern[str], MetricMeaning], ...]) -> _Found | None:
    for pattern, entry in candidates:
        found = pattern.fullmatch(key)
        if found is not None:
            return entry, {name: value for name, value in found.groupdict().items() if value is not None}
    return None


_Found = tuple[MetricMeaning, dict[str, str]]
"""An entry and the values of its named placeholders in the key."""

_STAT_WORDS: Final = {"mean": "mean", "median": "median", "max": "maximum", "min": "minimum"}


def _find(key: str) -> _Found | None:
    """The entry describing ``key`` and its placeholders' values (``eval/{name}/X``: the sample metric X)."""
    exact, patterns = _tables()
    if key in exact:
        return exact[key], {}
    found = _match(key, patterns)
    if found is not None or not key.startswith("eval/"):
        return found
    _eval, eval_set, rest = [*key.split("/", 2), "", ""][:3]
    if not eval_set or not rest:
        return None
    return _match(rest, tuple((_compile(entry.template), entry) for entry in SAMPLE_METRICS))


def metric_source(key: str) -> MetricMeaning | None:
    """The table entry that describes ``key`` (None: not a key miles-tui traced in miles' source)."""
    found = _find(key)
    return None if found is None else found[0]


def metric_meaning(key: str) -> str | None:
    """The one-line description of ``key`` (None: not a key miles-tui traced in miles' source).

    The entry's ``{stat}``, ``{n}`` and ``{timer}`` are filled from the key; ``eval/{name}/X`` is said to be
    of the eval set ``{name}``.
    """
    found = _find(key)
    if found is None:
        return None
    entry, values = found
    meaning = entry.meaning
    for name, value in values.items():
        meaning = meaning.replace(f"{{{name}}}", _STAT_WORDS.get(value, value) if name == "stat" else value)
    if not entry.template.startswith("eval/") and key.startswith("eval/"):
        return f"eval set {key.split('/', 2)[1]}: {meaning}"
    return meaning
