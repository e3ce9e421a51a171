"""``export --step N --sample I --conversation``: the sample's recorded conversation as JSON, read as the
conversation view reads it, checked against miles' own reader on the golden tp_dup case."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from miles_tui.core.dump import conversation_document, read_sidecar, tool_call
from miles_tui.core.synth.dump_files import write_trajectory
from miles_tui.tui.cli import main
from tests.conftest import GOLDEN


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    status = main(["export", *argv])
    captured = capsys.readouterr()
    return status, json.loads(captured.out) if captured.out else None, captured.err


def test_tp_dup_conversations_match_miles(
    golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = golden_copy("tp_dup")
    truth = json.loads((GOLDEN / "tp_dup.truth.json").read_text())["trajectory"]
    for name, expected in truth.items():
        evaluation = name.startswith("eval_")
        first = expected["first"]
        argv = [str(root), "--step", name.removeprefix("eval_"), "--sample", str(first["sample_index"])]
        status, document, err = _export(capsys, *argv, *(["--eval"] if evaluation else []), "--conversation")
        assert status == 0, err
        assert document["evaluation"] is evaluation and document["rollout_id"] == int(name.removeprefix("eval_"))
        for key in ("sample_index", "group_index", "status", "reward", "prompt"):
            assert document[key] == first[key]
        assert len(document["messages"]) == len(first["messages"])
        for got, want in zip(document["messages"], first["messages"], strict=True):
            assert (got["role"], got["content"], got["name"]) == (want["role"], want["content"], want.get("name"))
            calls = want.get("tool_calls") or []
            assert [c["call"] for c in got["tool_calls"]] == calls
            assert [(c["name"], c["arguments"]) for c in got["tool_calls"]] == [
                (c["function"]["name"], c["function"]["arguments"]) for c in calls
            ]


def test_missing_step_sample_or_sidecar_is_one_clear_error(
    golden_copy: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = golden_copy("tp_dup")
    status, _, err = _export(capsys, str(root), "--step", "0", "--sample", "1", "--conversation")
    assert status == 1 and "trajectory/0.jsonl" in err and "sample 1" in err and "0, 3, 6, 9" in err
    status, _, err = _export(capsys, str(root), "--step", "9", "--sample", "0", "--conversation")
    assert status == 1 and "step 9 is not in this run" in err
    assert "Traceback" not in err
    plain = golden_copy("pp2")  # a run that recorded no conversations
    status, _, err = _export(capsys, str(plain), "--step", "0", "--sample", "0", "--conversation")
    assert status == 1 and "trajectory/0.jsonl" in err and "recorded no conversations" in err
    status, _, err = _export(capsys, str(root), "--step", "0", "--conversation")
    assert status == 1 and "--conversation prints one sample's messages as JSON: give --sample I" in err
    status, _, err = _export(capsys, str(root), "--conversation")
    assert status == 1 and "--conversation/--per-token/--eval need --step N" in err


def test_both_tool_call_shapes_reasoning_and_non_finite_values(
    demo_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = {
        "sample_index": 4,
        "group_index": 1,
        "status": "truncated",
        "reward": math.nan,
        "prompt": [{"role": "user", "content": "hi"}],
        "messages": [
            {"role": "user", "content": "2+2?"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "add them",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": '{"x": "2+2"}'}},
                    {"name": "lookup", "arguments": {"q": "four"}},
                    {"id": "c3"},
                ],
            },
            {"role": "tool", "name": "calc", "content": "4"},
        ],
    }
    write_trajectory(demo_run, 0, [record])
    sidecar = read_sidecar(demo_run, 0, False)
    assert sidecar is not None
    document = conversation_document(sidecar.conversations[4])
    assistant = document["messages"][1]
    assert assistant["content"] == "" and assistant["reasoning_content"] == "add them"  # null content: empty
    assert [(c["name"], c["arguments"]) for c in assistant["tool_calls"]] == [
        ("calc", '{"x": "2+2"}'),
        ("lookup", {"q": "four"}),
        (None, None),
    ]
    assert tool_call({"function": "not a mapping", "name": "flat"}).name == "flat"
    assert document["messages"][2]["name"] == "calc" and document["prompt"] == record["prompt"]
    assert math.isnan(document["reward"])
    status, exported, err = _export(capsys, str(demo_run), "--step", "0", "--sample", "4", "--conversation")
    assert status == 0, err
    assert exported["reward"] is None  # strict JSON: a non-finite value is null
    assert exported["messages"] == json.loads(json.dumps(document["messages"]))
