"""Regenerate screenshots/*.svg from the real app: `python screenshots/generate.py`.

Every scene of screenshots/scenes.py at 80x24 and 160x48, written next to this
file. Never edit the SVGs by hand.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from screenshots.scenes import SCENES, SIZES  # noqa: E402


async def shoot(workdir: Path) -> list[Path]:
    written = []
    for scene in SCENES:
        for width, height in SIZES:
            app = scene.app(workdir)
            async with app.run_test(size=(width, height)) as pilot:
                await scene.driver()(pilot)
                target = HERE / f"{scene.name}_{width}x{height}.svg"
                app.save_screenshot(filename=target.name, path=str(HERE))
                written.append(target)
    return written


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="miles-tui-shots-") as tmp:
        for path in asyncio.run(shoot(Path(tmp))):
            print(path.relative_to(HERE.parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
