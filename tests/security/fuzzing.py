"""The reader fuzzer's parts: a worker process, pickle opcode streams, mutations of real archives, and
conversation sidecars and tokenizer files (a hypothesis strategy per record kind, plus mutated lines).

Every case is loaded by one long-lived child process (``load_child.py serve``)
under an address-space limit, one case at a time, with a per-case timeout: the
imports are paid once, and a crash, a hang or a blow-up kills only the worker,
which is restarted, and the case is kept. The only acceptable outcomes are a
value or the project's own error naming the file (and never a MemoryError:
the allowance must refuse first).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import select
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.security.hostile import CHILD, REPO

WORKER_MEM_MB = 512
CASE_PATHS = {"pt": "case.pt", "sidecar": "run/trajectory/1.jsonl", "tokenizer": "run/tokenizer/tokenizer.json"}
"""Where the worker finds a case of each kind (sidecars and tokenizers are read from a run's layout)."""
CASE_TIMEOUT = 20.0
"""Seconds a single case may take (a load is milliseconds; the machine may be busy)."""


@dataclass
class Verdict:
    """What became of one case."""

    ok: bool
    detail: str
    report: dict[str, Any] = field(default_factory=dict)
    """The child's answer (a telemetry case's findings)."""


@dataclass
class Worker:
    """One child process that loads case files on request; restarted after a crash or a hang."""

    scratch: Path
    proc: subprocess.Popen[str] | None = None
    restarts: int = 0
    cases: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment of the child (``MILES_TUI_NO_SCANNER``, a cache directory)."""

    def start(self) -> None:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **self.env}
        argv = [sys.executable, str(CHILD), "serve", "-", str(WORKER_MEM_MB)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env
        )

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _restart(self) -> None:
        self.stop()
        self.restarts += 1
        self.start()

    def load(self, data: bytes, kind: str) -> Verdict:
        """Load ``data`` (an archive for ``kind`` "pt", raw pickle bytes for "pickle") in the worker."""
        path = self.scratch / CASE_PATHS.get(kind, "case.pkl")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return self.ask({"kind": kind, "path": str(path)})

    def ask(self, request: dict[str, Any]) -> Verdict:
        """One case (a request line for ``load_child.py serve``), answered within :data:`CASE_TIMEOUT`."""
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.cases += 1
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self._restart()
            return Verdict(False, "worker was dead before the case")
        ready, _, _ = select.select([self.proc.stdout], [], [], CASE_TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            rc = self.proc.poll()
            detail = f"timeout after {CASE_TIMEOUT}s" if rc is None else f"worker died rc={rc}"
            self._restart()
            label = "timeout" if rc is None else "died"
            self.outcomes[label] = self.outcomes.get(label, 0) + 1
            return Verdict(False, detail)
        report = json.loads(line)
        outcome = report.get("outcome", "?")
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome == "value":
            return Verdict(True, "value", report)
        if outcome == "error" and report.get("names_file") and "MemoryError" not in report.get("message", ""):
            return Verdict(True, report["class"])
        return Verdict(False, json.dumps(report)[:2000])


# --- pickle opcode streams -------------------------------------------------------------------------

GLOBALS = [
    ("builtins", name)
    for name in ("set", "frozenset", "list", "tuple", "dict", "bytes", "bytearray", "range", "str", "int")
] + [
    ("builtins", "float"),
    ("builtins", "complex"),
    ("builtins", "slice"),
    ("builtins", "object"),
    ("builtins", "getattr"),
    ("builtins", "eval"),
    ("os", "system"),
    ("collections", "OrderedDict"),
    ("copyreg", "_reconstructor"),
    ("copyreg", "__newobj__"),
    ("_codecs", "encode"),
    ("datetime", "datetime"),
    ("datetime", "timedelta"),
    ("datetime", "timezone"),
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_tensor_v3"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch", "Size"),
    ("torch", "LongStorage"),
    ("torch", "FloatStorage"),
    ("torch", "BFloat16Storage"),
    ("torch", "BoolStorage"),
    ("torch", "float32"),
    ("torch", "bfloat16"),
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("miles_tui.core.dump.pt_archive", "_rebuild_inert"),
    ("miles.utils.types", "RewardSpec"),
    ("some.module", "Thing"),
]
NO_ARG = list(b"()012Naesu\x88\x89\x90\x93\x97\x98.QRtb\x81\x92\x85\x86\x87]}\x8f\x91ldo\x94")
STRINGS = ["storage", "cpu", "cuda:0", "0", "1", "i8", "f4", "b1", "O", "V8", "<", "|", "latin1", "utf-8", "x" * 40]


def _pack(fmt: str, value: int) -> bytes:
    try:
        return struct.pack(fmt, value)
    except struct.error:
        return struct.pack(fmt, 0)


def _tuple_of_longs(values: list[int]) -> bytes:
    return b"(" + b"".join(b"\x8a\x08" + _pack("<q", v) for v in values) + b"t"


@st.composite
def opcode(draw: Any) -> bytes:
    """One opcode with an argument that is usually well formed and sometimes a lie."""
    kind = draw(st.integers(0, 15))
    small = st.integers(0, 300)
    big = st.sampled_from([0, 1, 7, 255, 256, 65535, 2**20, 2**26, 2**31 - 1, 2**32 - 1, 2**40, 2**63 - 1])
    if kind <= 3:
        return bytes([draw(st.sampled_from(NO_ARG))])
    if kind == 4:
        value = draw(st.integers(-(2**31), 2**31 - 1))
        encodings = [b"K" + _pack("<B", value & 0xFF), b"M" + _pack("<H", value & 0xFFFF), b"J" + _pack("<i", value)]
        return draw(st.sampled_from(encodings))
    if kind == 5:
        raw = draw(st.binary(max_size=9))
        return draw(st.sampled_from([b"\x8a" + bytes([len(raw)]) + raw, b"\x8b" + _pack("<i", len(raw)) + raw]))
    if kind == 6:
        return b"G" + struct.pack("<d", draw(st.floats(allow_nan=True)))
    if kind == 7:
        text = draw(st.sampled_from(STRINGS) | st.text(max_size=20)).encode("utf-8", "surrogatepass")
        length = draw(st.sampled_from([len(text), len(text)]) | big)
        op = draw(st.sampled_from([b"X", b"\x8c", b"\x8d"]))
        width = {b"X": "<I", b"\x8c": "<B", b"\x8d": "<Q"}[op]
        return op + _pack(width, length) + text
    if kind == 8:
        raw = draw(st.binary(max_size=24))
        length = draw(st.just(len(raw)) | big)
        op = draw(st.sampled_from([b"B", b"C", b"\x8e", b"\x96", b"T", b"U"]))
        width = {b"B": "<I", b"C": "<B", b"\x8e": "<Q", b"\x96": "<Q", b"T": "<i", b"U": "<B"}[op]
        return op + _pack(width, length) + raw
    if kind == 9:
        index = draw(small | big)
        return draw(
            st.sampled_from([b"q" + _pack("<B", index & 0xFF), b"r" + _pack("<I", index), b"p%d\n" % index, b"\x94"])
        )
    if kind == 10:
        index = draw(small)
        return draw(st.sampled_from([b"h" + _pack("<B", index & 0xFF), b"j" + _pack("<I", index), b"g%d\n" % index]))
    if kind == 11:
        module, name = draw(st.sampled_from(GLOBALS))
        if draw(st.booleans()):
            return f"c{module}\n{name}\n".encode()
        return b"\x8c" + bytes([len(module)]) + module.encode() + b"\x8c" + bytes([len(name)]) + name.encode() + b"\x93"
    if kind == 12:
        return b"\x95" + _pack("<Q", draw(small | big))
    if kind == 13:  # a persistent id as torch writes one
        key = draw(st.sampled_from(["0", "1", "2"]))
        numel = draw(st.integers(0, 8) | big)
        storage = draw(st.sampled_from(["LongStorage", "FloatStorage", "BoolStorage", "BFloat16Storage"]))
        return (
            b"(\x8c\x07storage"
            + f"ctorch\n{storage}\n".encode()
            + b"\x8c\x01"
            + key.encode()
            + b"\x8c\x03cpu"
            + b"J"
            + _pack("<i", numel & 0x7FFFFFFF)
            + b"tQ"
        )
    if kind == 14:  # a tensor call over that storage
        dims = draw(st.lists(st.integers(0, 9) | big, min_size=0, max_size=3))
        strides = draw(st.lists(st.integers(0, 9) | big, min_size=len(dims), max_size=len(dims)))
        return b"K\x00" + _tuple_of_longs(dims) + _tuple_of_longs(strides) + b"\x89)"
    return draw(st.sampled_from([b"I12\n", b"L99999999999999999999L\n", b"F1.5\n", b"S'abc'\n", b"Vab\n"]))


REPEATED = [b"\x85", b"2\x86", b"(", b"t", b"]", b"}", b"\x8f", b"0h\x01N\x86q\x01", b"h\x00)R", b"2", b"K\x00", b"(t"]
"""Snippets that build depth or count when repeated (nesting, amplification, stack growth)."""


def _numpy_fragments() -> list[bytes]:
    """Opcodes numpy itself writes (arrays, scalars, dtypes), some with forged states, without PROTO/STOP."""
    import numpy as np

    from tests.security.hostile import Reduce

    values: list[Any] = [
        np.arange(6, dtype=np.int32).reshape(2, 3),
        np.float32(1.5),
        np.bool_(True),
        np.dtype(">f8"),
        np.zeros(3, dtype=[("a", "i4")]),
        np.array([1, "x"], dtype=object),
        Reduce(np.dtype, ("V8", False, True), (3, "|", None, ("a",), {"a": (np.dtype("O"), 0)}, 8, 1, 0)),
        Reduce(np.dtype, ("i8", False, True), (3, "<", None, None, None, -1, -1, 63)),
        Reduce(np.dtype, ("O8", False, True)),
    ]
    return [pickle.dumps(v, protocol=2)[2:-1] for v in values]


NUMPY = _numpy_fragments()


@st.composite
def opcode_stream(draw: Any) -> bytes:
    """A pickle: PROTO, a run of opcodes (often a known-good prefix), STOP."""
    proto = draw(st.integers(0, 5))
    head = b"\x80" + bytes([proto]) if proto >= 2 else b""
    repeated = st.builds(
        lambda snippet, n: snippet * n, st.sampled_from(REPEATED), st.sampled_from([1, 2, 10, 100, 1000, 20_000])
    )
    piece = opcode() | st.sampled_from(NUMPY) | repeated
    body = b"".join(draw(st.lists(piece, min_size=1, max_size=16)))
    # Often inside a container that hashes what it gets (a dict key, a set) or keeps it (a list).
    before, after = draw(st.sampled_from(TEMPLATES))
    return head + before + body + after + draw(st.sampled_from([b".", b"", b".junk"]))


TEMPLATES = [(b"", b""), (b"}K\x00", b"K\x01s"), (b"}", b"K\x01s"), (b"\x8f(", b"\x90"), (b"](", b"e"), (b"(", b"\x91")]
"""Around a generated body: nothing, a dict key, a set's items, a list's items, a frozenset's items."""


STORAGES = {"0": struct.pack("<4q", 1, 2, 3, 4), "1": struct.pack("<2f", 0.5, -1.0), "2": b"\x01\x00\x01\x00"}


# --- mutations of real archives --------------------------------------------------------------------


def golden_archives(root: Path) -> list[Path]:
    return sorted(root.rglob("*.pt")) if root.is_dir() else []


def _rebuild(original: bytes, edit: Any) -> bytes:
    """The archive with ``edit(name, data) -> data`` applied to each record, written STORED with good CRCs."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            target.writestr(zipfile.ZipInfo(info.filename), edit(info.filename, source.read(info)))
    return out.getvalue()


def mutate(original: bytes, rng: random.Random) -> bytes:
    """One mutation of a real archive: raw bytes anywhere, or the pickle / a storage with the CRCs redone."""
    how = rng.randrange(6)
    data = bytearray(original)
    if how == 0:  # flip bits anywhere (CRCs stay wrong)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if how == 1:  # truncate
        return bytes(data[: rng.randrange(len(data))])
    try:
        zipfile.ZipFile(io.BytesIO(original)).close()
    except zipfile.BadZipFile:
        return bytes(data)

    def edit_pickle(name: str, record: bytes) -> bytes:
        if not name.endswith("data.pkl"):
            return record
        body = bytearray(record)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(body))
            choice = rng.randrange(4)
            if choice == 0:
                body[pos] = rng.randrange(256)
            elif choice == 1:
                body[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
            elif choice == 2:
                del body[pos : pos + rng.randint(1, 9)]
            else:
                body[pos:pos] = rng.choice([b"r\x00\x00\x00\x04", b"\x8f" * 8, b"2" * 8, b"(", b"e", b"b", b"R"])
        return bytes(body)

    def edit_storage(name: str, record: bytes) -> bytes:
        if "/data/" not in name or rng.random() < 0.7:
            return record
        return record[: rng.randrange(len(record) + 1)] + bytes(rng.randrange(3) * 8)

    if how in (2, 3, 4):
        return _rebuild(original, edit_pickle)
    return _rebuild(original, edit_storage)


# --- conversation sidecars (trajectory/{rid}.jsonl) ---------------------------------------------------

MERSENNE = 2**61 - 1
"""Multiples of it all hash alike (CPython's int hash is not randomised)."""

_TEXT = st.text(max_size=40) | st.sampled_from(["", "\x1b[2J", "\u202e", "\ud800", "{}" * 20, "\u200d" * 8])
_INTS = st.integers(-(2**63), 2**63) | st.sampled_from([2**64, 10**30, 10**400, MERSENNE * 3, -MERSENNE * 7])
_SCALARS = st.none() | st.booleans() | _INTS | st.floats(allow_nan=False, allow_infinity=False) | _TEXT
_ANY_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
_TOOL_CALL = st.fixed_dictionaries(
    {},
    optional={
        "id": _TEXT,
        "type": st.just("function"),
        "function": st.fixed_dictionaries({}, optional={"name": _TEXT | _ANY_JSON, "arguments": _TEXT | _ANY_JSON}),
        "name": _TEXT,
        "arguments": _ANY_JSON,
    },
)
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["system", "user", "assistant", "tool"]) | _ANY_JSON,
        "content": _TEXT | _ANY_JSON,
        "reasoning_content": _TEXT | _ANY_JSON,
        "tool_calls": st.lists(_TOOL_CALL | _ANY_JSON, max_size=3) | _ANY_JSON,
        "name": _TEXT | _ANY_JSON,
    },
)
CONVERSATION = st.fixed_dictionaries(
    {"sample_index": _INTS | _ANY_JSON},
    optional={
        "group_index": _INTS | st.none() | _ANY_JSON,
        "status": st.sampled_from(["completed", "truncated", "aborted"]) | _ANY_JSON,
        "reward": _ANY_JSON,
        "prompt": _TEXT | st.lists(_MESSAGE, max_size=3) | _ANY_JSON,
        "messages": st.lists(_MESSAGE, max_size=6) | _ANY_JSON,
    },
)
"""One ``trajectory/{rid}.jsonl`` record: the spec's fields, each sometimes of a wrong type or size."""

_HOSTILE_LINES = [
    b'{"sample_index": 1, "messages": [' + b",".join([b"{}"] * 20_000) + b"]}",
    b'{"sample_index": 2, "messages": ' + b"[" * 5_000 + b"]" * 5_000 + b"}",
    b'{"sample_index": 3, "messages": [], "reward": 1' + b"0" * 5_000 + b"}",
    b'{"sample_index": ' + str(MERSENNE * 5).encode() + b', "messages": []}',
    b'{"sample_index": 4, "messages": [{"content": "' + b"\\" * 3_000 + b'"}]}',
    b"\xff\xfe{}",
    b"",
    b"   ",
]


def _mutate_line(line: bytes, rng: random.Random) -> bytes:
    """A damaged line: bytes flipped, inserted, deleted, the line cut, or structure repeated."""
    data = bytearray(line)
    for _ in range(rng.randint(1, 4)):
        how = rng.randrange(5)
        pos = rng.randrange(len(data) + 1)
        if how == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif how == 1:
            data[pos:pos] = rng.choice([b"{", b"[", b'"', b"\\", b":", b",", b"}", b"]", b"{}," * 50, b"\n"])
        elif how == 2:
            del data[pos : pos + rng.randint(1, 8)]
        elif how == 3:
            del data[pos:]
        else:
            data[pos:pos] = rng.choice([b"1e999", b"-0", b"NaN", b"Infinity", b"9" * 400, b"\\u0000"])
    return bytes(data)


@st.composite
def sidecar_file(draw: Any) -> bytes:
    """A sidecar: generated records, some lines damaged, some hostile lines, maybe a partial last line."""
    records = draw(st.lists(CONVERSATION, max_size=8))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    lines = [json.dumps(record, allow_nan=False).encode() for record in records]
    lines = [_mutate_line(line, rng) if rng.random() < 0.3 else line for line in lines]
    for _ in range(draw(st.integers(0, 2))):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(_HOSTILE_LINES))
    body = b"\n".join(lines) + b"\n"
    return body if rng.random() < 0.8 else body + b'{"sample_index": 9, "mess'


# --- tokenizer files (tokenizer/tokenizer.json) -------------------------------------------------------

REGEXES = ["(a+)+b", "(a|aa)+$", "(x+x+)+y", "a", "\\s+", "^", "(?=a)", "[", "(((", "\\p{L}+", ".*" * 10]
"""Replace patterns: backtracking ones, plain ones, and ones that do not compile."""
_DECODER = st.sampled_from(
    [
        None,
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "WordPiece", "prefix": "##", "cleanup": True},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        {"type": "ByteFallback"},
        {"type": "Nonsense"},
    ]
) | st.builds(
    lambda pattern, content: {"type": "Replace", "pattern": {"Regex": pattern}, "content": content},
    st.sampled_from(REGEXES),
    _TEXT,
)
_NORMALIZER = st.sampled_from([None, {"type": "NFC"}, {"type": "Lowercase"}, {"type": "NFKD"}]) | st.builds(
    lambda pattern: {"type": "Replace", "pattern": {"Regex": pattern}, "content": ""}, st.sampled_from(REGEXES)
)


@st.composite
def tokenizer_file(draw: Any) -> bytes:
    """A tokenizer.json: a WordLevel vocabulary (long tokens of one letter among them), a decoder (a sequence,
    sometimes), a normalizer, maybe damaged bytes."""
    size = draw(st.integers(1, 300))
    long_token = "a" * draw(st.integers(1, 40))
    vocab = {f"t{i}": i for i in range(size)}
    vocab[long_token + "c"] = size
    decoders = draw(st.lists(_DECODER, min_size=1, max_size=3))
    decoder = decoders[0] if len(decoders) == 1 else {"type": "Sequence", "decoders": [d for d in decoders if d]}
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": draw(_NORMALIZER),
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": decoder,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"},
    }
    data = json.dumps(document).encode()
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    return _mutate_line(data, rng) if rng.random() < 0.2 else data
