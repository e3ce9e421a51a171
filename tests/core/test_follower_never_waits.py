"""The UI thread asks which views have data on every key binding check: the follower answers without waiting for
a poll that holds it (a cold start reads every phase hour, for seconds: `u` pressed then waited for it)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from miles_tui.core.follow import RunFollower


def _run(root: Path) -> Path:
    hours = root / "dashboard" / "gpu_util"
    hours.mkdir(parents=True)
    (hours / "20260820_10.jsonl").write_text(json.dumps({"ts": 1.0, "node": "n", "gpu": 0, "util": 5}) + "\n")
    (root / "dashboard" / "meta.json").write_text("{}")
    return root


def test_has_hours_answers_while_a_poll_holds_the_follower(tmp_path: Path) -> None:
    follower = RunFollower(_run(tmp_path / "run"))
    follower.poll(10.0)
    expected = follower.has_hours("gpu_util"), follower.has_hours("phases")
    held, release = threading.Event(), threading.Event()

    def poll_in_progress() -> None:
        with follower._lock:  # what a long poll does
            held.set()
            release.wait(10)

    thread = threading.Thread(target=poll_in_progress)
    thread.start()
    held.wait(5)
    answered = [None, None]

    def ask() -> None:
        answered[:] = [follower.has_hours("gpu_util"), follower.has_hours("phases")]

    asker = threading.Thread(target=ask)
    asker.start()
    asker.join(2)
    alive = asker.is_alive()
    release.set()
    thread.join()
    assert not alive, "has_hours waited for the poll"
    assert tuple(answered) == expected


def test_before_any_answer_it_lists_the_folder(tmp_path: Path) -> None:
    follower = RunFollower(_run(tmp_path / "run"))
    with follower._lock:
        assert follower._hour_files_listed("gpu_util") and not follower._hour_files_listed("phases")


def test_open_phases_answer_the_last_poll_while_a_poll_holds_the_follower(tmp_path: Path) -> None:
    """The GPU view reads the open phases when it draws: it waited for the cold first poll (5.1 s for `u` on the
    generated week, against 1.45 s now)."""
    run = _run(tmp_path / "run")
    phases = run / "dashboard" / "phases"
    phases.mkdir()
    marker = {"name": "actor_train", "t0": 5.0, "t1": -1.0, "node": "n", "gpus": [0], "rank": 0, "role": "train"}
    (phases / "20260820_10.jsonl").write_text(json.dumps(marker) + "\n")
    follower = RunFollower(run)
    assert follower.open_phases() == ()  # before the first poll: nothing known, and nothing waited for
    follower.poll(10.0)
    [open_phase] = follower.open_phases()
    assert open_phase.name == "actor_train" and open_phase.t0 == 5.0
    answered: list[object] = []
    with follower._lock:  # what a long poll does
        asker = threading.Thread(target=lambda: answered.append(follower.open_phases()))
        asker.start()
        asker.join(2)
        assert not asker.is_alive(), "open_phases waited for the poll"
    assert answered == [(open_phase,)]
