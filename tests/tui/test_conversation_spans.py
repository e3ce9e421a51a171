"""The conversation tab: inline <think> and <tool_call> spans styled apart, and z folding system/tool messages."""

from __future__ import annotations

import time
from pathlib import Path

from textual.content import Content
from textual.widgets import Static

from miles_tui.core.dump import Conversation, Run, Sidecar
from miles_tui.core.dump import Message as ChatMessage
from miles_tui.tui.screens.sample_screen import SampleScreen
from tests.conftest import GOLDEN
from tests.harness import screen_text, settle
from tests.tui.test_sample_screen import SampleApp

SYSTEM = "You are a careful solver.\n" * 40
ANSWER = '<think>2+2 is 4,\nnot 5</think>Let me check.<tool_call>{"name": "calc"}</tool_call>It is 4.'


def _app() -> SampleApp:
    run = Run(GOLDEN / "tp_dup", use_cache=False)
    step = run.open(0, False, time.time() + 3600)
    messages = (
        ChatMessage("system", SYSTEM, None, (), None),
        ChatMessage("user", "what is 2+2? [b]", None, (), None),
        ChatMessage("assistant", ANSWER, None, (), None),
        ChatMessage("tool", "4", None, (), "calc"),
    )
    sidecar = Sidecar(Path("trajectory/0.jsonl"), {1: Conversation(1, 0, "completed", 1.0, "p", messages)}, ())
    return SampleApp(lambda: SampleScreen(step, 1, run.detokenizer, sidecar))


def _bodies(app: SampleApp) -> list[str]:
    return [str(w.render()) for w in app.screen.query("#messages .message").results(Static)]


async def test_think_and_tool_call_spans_are_labelled_and_styled_apart() -> None:
    app = _app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assistant = _bodies(app)[2]
        assert (
            assistant
            == '[think] 2+2 is 4,\nnot 5 [/think]Let me check.[tool call] {"name": "calc"} [/tool call]It is 4.'
        )
        widget = list(app.screen.query("#messages .message").results(Static))[2]
        content = widget.render()
        styles = {str(span.style) for span in content.spans}  # type: ignore[attr-defined]
        assert any("italic" in s for s in styles) and any("accent" in s for s in styles), styles


async def test_z_folds_system_and_tool_messages_and_unfolds_them() -> None:
    app = _app()
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("z")  # on the tokens tab: says where it works
        await settle(pilot, linger=0.2)
        assert "z folds the" in screen_text(app)
        await pilot.press("t", "z")
        await pilot.pause()
        system, user, assistant, tool = _bodies(app)
        assert system == "▸ 40 lines, 1,040 characters (z: unfold)" and tool == "▸ 1 line, 1 character (z: unfold)"
        assert user == "what is 2+2? [b]" and assistant.startswith("[think]")
        await pilot.press("z")
        await pilot.pause()
        assert _bodies(app)[0] == SYSTEM and _bodies(app)[3] == "4"


async def test_each_message_is_numbered_from_0_as_miles_numbers_them() -> None:
    app = _app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        widgets = app.screen.query("#messages .message").results(Static)
        titles = [Content.from_markup(str(w.border_title)).plain for w in widgets]
        assert titles == ["system #0", "user #1", "assistant #2", "tool · calc #3"]
        assert "─ system #0 ─" in screen_text(app)
