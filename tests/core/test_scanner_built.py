"""The compiled line scanner is optional for a user (telemetry decodes without it, slower), but not for CI:
its tests skip where it is not built, so CI must fail instead of going green on the slow path alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from miles_tui.core.telemetry.metrics import line_templates


@pytest.mark.skipif(not os.environ.get("CI"), reason="a user may run without the scanner; CI (CI=1) may not")
def test_ci_has_the_compiled_scanner() -> None:
    assert line_templates.AVAILABLE, "the C line scanner did not build: its tests were skipped"


def test_version_says_whether_the_scanner_is_built() -> None:
    env = {**os.environ, "MILES_TUI_NO_SCANNER": "1"}
    off = subprocess.run(
        [sys.executable, "-m", "miles_tui.tui.cli", "--version"], check=False, capture_output=True, text=True, env=env
    )
    assert off.returncode == 0 and "line scanner: off" in off.stdout, off.stdout + off.stderr
    if line_templates.AVAILABLE:
        env.pop("MILES_TUI_NO_SCANNER")
        on = subprocess.run(
            [sys.executable, "-m", "miles_tui.tui.cli", "--version"],
            check=False,
            capture_output=True,
            text=True,
            env=env,
        )
        assert "line scanner: compiled" in on.stdout, on.stdout
