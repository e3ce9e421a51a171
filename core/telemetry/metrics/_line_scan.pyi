from typing import Any

Buffer = Any

def scan(
    block: Buffer,
    lo: int,
    hi: int,
    templates: tuple[tuple[bytes, ...], ...],
    kinds: Buffer,
    starts: Buffer,
    values: Buffer,
    flags: Buffer,
    /,
) -> tuple[int, int, int]: ...
def skeletons(block: Buffer, hi: int, starts: Buffer, out: Buffer, /) -> None: ...
