"""Run.sample_context: the one read behind every "open this sample" in the app."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_tui.core.base.errors import StepNotFoundError
from miles_tui.core.dump import Run
from tests.conftest import EPOCH


def test_a_sample_comes_with_its_step_conversations_tokenizer_and_cursor(demo_run: Path) -> None:
    run = Run(demo_run)
    first = run.summary(2, False, EPOCH).rows[0].sample_index
    context = run.sample_context(2, False, first, EPOCH, cursor=lambda step: step.position_of(first) + 3)
    assert context.step.summary.rollout_id == 2
    assert context.sample_index == first
    assert context.cursor == 3
    assert context.detokenizer is run.detokenizer
    assert context.sidecar is not None  # the demo records conversations
    assert run.sample_context(2, False, first, EPOCH, cursor=7).cursor == 7


def test_a_sample_the_step_does_not_have_is_a_clear_error(demo_run: Path) -> None:
    with pytest.raises(StepNotFoundError, match="step 2 has no sample 999999"):
        Run(demo_run).sample_context(2, False, 999_999, EPOCH)
