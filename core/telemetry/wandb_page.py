"""The run's Weights & Biases page, from the arguments miles records in ``dashboard/meta.json``.

Contract:

- miles persists ``wandb_team``, ``wandb_project``, ``wandb_group``, ``wandb_run_id`` and ``wandb_host`` into
  meta.json's ``args`` (miles/dashboard/args.py ``_SNAPSHOT_KEYS``; ``wandb_run_id`` is the id ``wandb.init``
  gave, miles/utils/tracking_utils/wandb_utils.py), and its web dashboard links
  ``{host or https://wandb.ai}/{team}/{project}/runs/{run_id}`` (miles/dashboard/server.py ``_wandb_url``).
- :func:`wandb_link` builds the same URL: the run's page when the run id is recorded, else the project's page
  (``run_known`` False, and ``note`` says so); None when the args name no project.
- Every value is untrusted. A part (team, project, run id) is used only when it is a string of 1-128
  printable characters (no control, format or separator-line character, not blank), and is percent-encoded
  as one path segment (``/`` included). The host is used only when it is ``http(s)://`` followed by a
  hostname of letters, digits, ``-`` and ``.`` and an optional port, nothing else (no user, path, query or
  fragment). A value that fails gives no URL, and ``note`` names the argument (never its value).

Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

DEFAULT_HOST: Final = "https://wandb.ai"
"""miles' default when ``--wandb-host`` is not given."""

MAX_PART: Final = 128
"""Longest team, project or run id used in a URL."""

_HOST: Final = re.compile(r"(https?)://([A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(:[0-9]{1,5})?/?")


@dataclass(frozen=True, slots=True)
class WandbLink:
    """Where the run's W&B page is, or why no URL could be built."""

    url: str | None
    """The URL (None: an argument was not usable; ``note`` says which)."""
    run_known: bool
    """Whether the URL is the run's own page (False: the project's page, or no URL)."""
    note: str
    """What the URL is (``W&B run``, ``W&B project (run id not recorded)``), or why there is none."""
    group: str | None
    """``--wandb-group`` when it is a usable part (W&B shows it as the run's group), else None."""


def _usable(value: Any) -> str | None:
    """``value`` when it is a string fit to be one URL path segment before encoding, else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_PART or not value.strip():
        return None
    if any(unicodedata.category(char)[0] in "CZ" and char != " " for char in value):
        return None  # control, format, surrogate, private-use, unassigned, line/paragraph separators
    return value


def _segment(value: str) -> str:
    """``value`` percent-encoded as one path segment (every reserved character, ``/`` too)."""
    return quote(value, safe="")


def _host(value: Any) -> str | None:
    """The base URL of ``--wandb-host`` (default when absent), or None when it is not a plain http(s) host."""
    if value is None or value == "":
        return DEFAULT_HOST
    if not isinstance(value, str) or len(value) > 300:
        return None
    found = _HOST.fullmatch(value)
    if found is None:
        return None
    scheme, host, port = found.group(1), found.group(2), found.group(3) or ""
    if port and not 0 < int(port[1:]) < 65536:
        return None
    return f"{scheme}://{host.lower()}{port}"


def wandb_link(args: Mapping[str, Any]) -> WandbLink | None:
    """The W&B page of a run whose meta.json args are ``args`` (None: the args name no W&B project)."""
    if args.get("wandb_project") in (None, ""):
        return None
    group = _usable(args.get("wandb_group"))
    project, team = _usable(args.get("wandb_project")), _usable(args.get("wandb_team"))
    host = _host(args.get("wandb_host"))
    if project is None:
        return WandbLink(None, False, "W&B: wandb_project is not a usable name", group)
    if team is None:
        missing = "not recorded" if args.get("wandb_team") in (None, "") else "not a usable name"
        return WandbLink(None, False, f"W&B: wandb_team {missing} (the URL needs the entity)", group)
    if host is None:
        return WandbLink(None, False, "W&B: wandb_host is not a plain http(s) host", group)
    base = f"{host}/{_segment(team)}/{_segment(project)}"
    raw_id = args.get("wandb_run_id")
    run_id = _usable(raw_id)
    if run_id is not None:
        return WandbLink(f"{base}/runs/{_segment(run_id)}", True, "W&B run", group)
    why = "run id not recorded" if raw_id in (None, "") else "run id not a usable name"
    return WandbLink(base, False, f"W&B project ({why})", group)
