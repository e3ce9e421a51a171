"""wandb_link: the W&B URL miles' own dashboard links, built only from validated, percent-encoded parts."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from miles_tui.core.telemetry import wandb_link

ARGS = {"wandb_team": "rl-lab", "wandb_project": "qwen3-grpo", "wandb_run_id": "a1b2c3d4", "wandb_group": "exp_7"}


def test_run_url_as_miles_builds_it() -> None:
    link = wandb_link(ARGS)
    assert link is not None
    assert link.url == "https://wandb.ai/rl-lab/qwen3-grpo/runs/a1b2c3d4"
    assert link.run_known and link.note == "W&B run" and link.group == "exp_7"


def test_own_host_trailing_slash_dropped() -> None:
    link = wandb_link({**ARGS, "wandb_host": "https://WandB.example.com:8443/"})
    assert link is not None and link.url == "https://wandb.example.com:8443/rl-lab/qwen3-grpo/runs/a1b2c3d4"


def test_project_url_when_the_run_id_is_unknown_says_so() -> None:
    link = wandb_link({**ARGS, "wandb_run_id": None})
    assert link is not None
    assert link.url == "https://wandb.ai/rl-lab/qwen3-grpo" and not link.run_known
    assert link.note == "W&B project (run id not recorded)"
    hostile = wandb_link({**ARGS, "wandb_run_id": "x\x1b]52;c;AAAA\x07"})
    assert hostile is not None and hostile.url == "https://wandb.ai/rl-lab/qwen3-grpo"
    assert hostile.note == "W&B project (run id not a usable name)"


def test_no_project_no_link() -> None:
    assert wandb_link({}) is None
    assert wandb_link({"wandb_team": "t", "wandb_project": None}) is None
    assert wandb_link({"wandb_project": ""}) is None


def test_parts_are_percent_encoded_as_one_segment() -> None:
    link = wandb_link({"wandb_team": "a/../b", "wandb_project": "p?q#r s", "wandb_run_id": "%2e%2e"})
    assert link is not None
    assert link.url == "https://wandb.ai/a%2F..%2Fb/p%3Fq%23r%20s/runs/%252e%252e"


def test_unusable_values_give_no_url_and_name_the_argument() -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"wandb_project": "p"}, "wandb_team not recorded"),
        ({"wandb_project": "p", "wandb_team": "t\nx"}, "wandb_team not a usable name"),
        ({"wandb_project": "p\u202e", "wandb_team": "t"}, "wandb_project is not a usable name"),
        ({"wandb_project": 5, "wandb_team": "t"}, "wandb_project is not a usable name"),
        ({"wandb_project": "p", "wandb_team": "x" * 129}, "wandb_team not a usable name"),
        ({"wandb_project": "p", "wandb_team": "   "}, "wandb_team not a usable name"),
    ]
    for args, says in cases:
        link = wandb_link(args)
        assert link is not None and link.url is None and says in link.note, args
    for host in (
        "javascript:alert(1)",
        "https://user:pw@evil.example",
        "https://a.example/path",
        "https://a.example?x=1",
        "ftp://a.example",
        "https://a.example:99999",
        "https://a.example\n.b",
        "https://-bad.example",
        7,
    ):
        link = wandb_link({**ARGS, "wandb_host": host})
        assert link is not None and link.url is None and "wandb_host" in link.note, host


def test_unusable_group_is_left_out() -> None:
    link = wandb_link({**ARGS, "wandb_group": "g\x1b[2J"})
    assert link is not None and link.group is None and link.url is not None


_SAFE_URL = re.compile(
    r"https?://[a-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9%._~-]+/[A-Za-z0-9%._~-]+(/runs/[A-Za-z0-9%._~-]+)?"
)


_VALUE = st.one_of(st.none(), st.text(max_size=24), st.integers(), st.sampled_from(["https://h.example", "http://h:1"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {"wandb_project": _VALUE},
        optional=dict.fromkeys(("wandb_team", "wandb_run_id", "wandb_host", "wandb_group"), _VALUE),
    )
)
def test_any_args_give_a_plain_ascii_url_or_none(args: dict[str, Any]) -> None:
    link = wandb_link(args)
    if link is None:
        assert args.get("wandb_project") in (None, "")
        return
    assert link.url is None or _SAFE_URL.fullmatch(link.url), link.url
    assert link.note.isprintable()
