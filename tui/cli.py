"""The ``miles-tui`` command line: the live monitor, ``--demo``, and headless ``export``/``report``.

The headless paths never import textual (a cron job or CI box need not draw),
and every failure is one line on stderr naming the file, with a non-zero exit
status; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from miles_tui.core.base.errors import MilesTuiError, RunDirError, StillWritingError
from miles_tui.core.base.inert_text import inert
from miles_tui.core.base.memory_settings import no_huge_pages
from miles_tui.tui import export_telemetry

EXIT_ERROR = 1
EXIT_USAGE = 2
"""argparse's status for a command line it cannot parse (unknown option, bad value)."""
EXIT_STILL_WRITING = 75
"""sysexits' EX_TEMPFAIL: the step is still being written; try again shortly."""
EXIT_INTERNAL = 70
"""sysexits' EX_SOFTWARE: a bug in miles-tui, never the run's fault. Distinct from every status a script acts
on (``report``'s 0-3 run health, 1 an error about the input, 2 usage, 75 still writing), so a cron job never
reads a crash as "warning"."""

SUBCOMMANDS = ("export", "report")
MIN_POLL_SECONDS = 0.2
"""The shortest ``--poll`` interval: faster polling only burns the shared filesystem."""


class _Parser(argparse.ArgumentParser):
    """argparse with errors on one line (what is wrong, and where to look), not usage + message."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        name = f"miles-tui {version('miles-tui')}"
    except PackageNotFoundError:
        name = "miles-tui (version unknown: not installed as a package)"
    return f"{name}\n{_scanner_line()}"


class _VersionAction(argparse.Action):
    """``--version``, worked out only when asked (it loads the scanner to say whether it is built)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        sys.stdout.write(_version() + "\n")
        parser.exit(0)


def _scanner_line() -> str:
    """Whether the compiled line scanner is in use: without it telemetry reads the same, several times slower."""
    from miles_tui.core.telemetry.metrics import line_templates

    if line_templates.AVAILABLE:
        return "line scanner: compiled (fast telemetry decoding)"
    if os.environ.get("MILES_TUI_NO_SCANNER"):
        return "line scanner: off (MILES_TUI_NO_SCANNER is set)"
    return "line scanner: not built (no C compiler at install?): telemetry decodes in Python, slower"


def _poll_seconds(text: str) -> float:
    """``--poll``: a finite number of seconds, at least MIN_POLL_SECONDS."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= MIN_POLL_SECONDS):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a poll interval: give seconds, at least {MIN_POLL_SECONDS} (e.g. --poll 10)"
        )
    return seconds


# -- --low-mfu-threshold (engines helper: the MFU rule's threshold, on the monitor and `report`) --------


def _mfu_threshold(text: str) -> float:
    """``--low-mfu-threshold X``: a fraction of the device peak in [0, 1); 0 turns the low-MFU advice off."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction in [0, 1) such as 0.15 (0 turns the check off)")
    return value


def _add_mfu_threshold(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--low-mfu-threshold",
        type=_mfu_threshold,
        metavar="X",
        help="advise when mean MFU stays under this fraction of the device peak (default 0.15; 0: off)",
    )


def _add_baseline(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--baseline", action="append", default=[], metavar="OTHER", help=f"another run dir: {what}")


def _low_mfu_threshold(args: argparse.Namespace) -> float:
    """The threshold given, else the rule's default (imported late: the headless path stays light)."""
    if args.low_mfu_threshold is not None:
        return float(args.low_mfu_threshold)
    from miles_tui.core.analysis import LOW_MFU

    return LOW_MFU


# ---------------------------------------------------------------------------------------------------


def _export_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="miles-tui export",
        description="Print a run's steps, a step's samples, or one sample's tokens as JSON (or CSV).",
        epilog="--tokens: token_ids (and token_text) cover the window [start, end) of the whole sequence, prompt "
        "included; loss_mask and every per-token array (rollout_log_probs, train_log_probs, ref_log_probs, lp_diff, "
        "imp_ratio, entropy, ref_entropy, advantages, returns) cover only its response part, positions "
        "max(start, prompt_len) to end: entry k belongs to token_ids[response_offset + k], null where loss-masked. "
        "--per-token: each array covers the sample's whole response, unmasked. --phases/--gpu/--engines: "
        "{stream, since, until, newest, count, fields, columns: {FIELD: [...]}, problems}, records whose time "
        "(a phase: its end, its start while open) is in [--since, --until], reading only the hours the window "
        "touches. The contract: docs/cli.md.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--step", type=int, metavar="N", help="the step (rollout id) to export")
    parser.add_argument("--eval", action="store_true", help="the evaluation batch taken at step N")
    parser.add_argument("--per-token", action="store_true", help="add each sample's resolved per-token arrays")
    parser.add_argument("--sample", type=int, metavar="I", help="a sample index (with --tokens)")
    parser.add_argument(
        "--tokens",
        action="store_true",
        help="print one sample's token payload (ids over the window, per-token arrays over its response part)",
    )
    parser.add_argument(
        "--conversation", action="store_true", help="print one sample's recorded conversation (with --sample I)"
    )
    parser.add_argument("--start", type=int, metavar="A", help="first token position (with --tokens)")
    parser.add_argument("--end", type=int, metavar="B", help="end token position, exclusive (with --tokens)")
    parser.add_argument("--metrics", nargs="*", metavar="KEY", help="metric series from dashboard/metrics.jsonl")
    parser.add_argument("--x", metavar="STEP_KEY", help="the step key to plot metrics against")
    parser.add_argument("--format", choices=("json", "csv"), default="json")
    export_telemetry.add_flags(parser)
    _cache_flags(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _report_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="miles-tui report",
        description="Summarize a run's health.",
        epilog="Exit status: 0 ok (an ended run with nothing else wrong), 1 warning, 2 critical, 3 RUN_DIR unreadable "
        "or not a dump, 75 still writing, 70 internal error (a bug: rerun with --debug and report it). "
        "See docs/cli.md (exit codes for cron).",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    _add_baseline(parser, "print the newest train step's figures against OTHER's same step (repeatable)")
    parser.add_argument(
        "--quiet-ok",
        action="store_true",
        help="a run gone quiet whose arguments do not say its last step (no num_rollout) exits 0, not as an alarm, "
        "unless a phase is still open (a run that reached num_rollout with its phases closed always exits 0)",
    )
    _add_mfu_threshold(parser)
    _cache_flags(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _monitor_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="miles-tui",
        description="Monitor a miles --dump-details run directory live in the terminal.",
        epilog="Headless: `miles-tui export RUN_DIR ...` and `miles-tui report RUN_DIR` "
        "(a run dir literally named export/report is given as ./export).",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="?")
    parser.add_argument("--no-follow", action="store_true", help="read once; do not poll for new data")
    parser.add_argument(
        "--poll",
        type=_poll_seconds,
        default=2.0,
        metavar="SECONDS",
        help=f"poll interval (default 2, at least {MIN_POLL_SECONDS})",
    )
    parser.add_argument(
        "--demo",
        nargs="?",
        const="",
        metavar="DIR",
        help="write a synthetic live run into DIR and monitor it (without DIR: a temp dir, deleted on exit)",
    )
    # Deep links: open on a step or a sample, with the overview (and the step) behind it.
    parser.add_argument("--step", type=int, metavar="N", help="open on step N")
    parser.add_argument("--eval", action="store_true", help="with --step: the eval batch taken at step N")
    parser.add_argument("--sample", type=int, metavar="I", help="with --step: open on sample I of that step")
    parser.add_argument("--no-bell", action="store_true", help="do not ring the bell when a critical advisory appears")
    _add_baseline(parser, "overlay OTHER's metrics and show Δ against its same step (repeatable: one mark each)")
    _add_mfu_threshold(parser)
    parser.add_argument("-V", "--version", action=_VersionAction, help="version; is the scanner built")
    _cache_flags(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


# -- cache flags (every command): core/base/cache_dir.py holds the switch and the cap -------------------------


def _cache_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache", action="store_true", help="read and write no cache (step summaries, telemetry columns)"
    )
    parser.add_argument(
        "--cache-max",
        metavar="SIZE",
        help="cap on the cache folder, least recently used first out (default 2G, or $MILES_TUI_CACHE_MAX_BYTES)",
    )


def _with_cache_flags(action: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str) -> int:
    """Run a command with its --no-cache/--cache-max in force (restored after, for in-process callers)."""
    from miles_tui.core.base import cache_dir

    try:
        cap = None if args.cache_max is None else cache_dir.parse_size(args.cache_max)
    except ValueError as err:
        print(f"{prog}: error: --cache-max: {inert(str(err))}", file=sys.stderr)
        return EXIT_USAGE
    with cache_dir.configured(off=args.no_cache, cap=cap):
        return _guarded(action, args, prog)


# ---------------------------------------------------------------------------------------------------------


def _emit(document: Any) -> None:
    sys.stdout.write(json.dumps(document, allow_nan=False))
    sys.stdout.write("\n")


def _warn_problems(document: dict[str, Any]) -> None:
    for problem in document.get("problems", []):
        if problem["kind"] == "still_writing":
            print(inert(f"miles-tui: note: {problem['message']}"), file=sys.stderr)
        else:
            print(
                inert(f"miles-tui: warning: {problem['message']}; samples it held are marked alignment_failed"),
                file=sys.stderr,
            )


def _without_cyclic_gc(action: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run a headless command with the cyclic GC paused, restoring it after (for in-process callers).

    Opening a step builds millions of acyclic objects (its samples' token and
    log-prob lists); the collector would walk all of them again in every
    generation they pass through, a sixth of a cold export, and free nothing.
    """

    @functools.wraps(action)
    def run(args: argparse.Namespace) -> int:
        collecting = gc.isenabled()
        gc.disable()
        try:
            return action(args)
        finally:
            if collecting:
                gc.enable()

    return run


class UsageError(Exception):
    """Options that parse but do not go together (or ask for nothing); exits 1 with one line."""


def _check_export_options(args: argparse.Namespace) -> None:
    """Refuse option combinations that would print something other than what was asked for."""
    problem = export_telemetry.usage_problem(args)
    if problem is not None:
        raise UsageError(problem)
    if export_telemetry.wanted(args):
        return
    if args.metrics is not None:
        if args.format == "csv":
            raise UsageError("--format csv is for a step's rows: give --step N, not --metrics")
        return
    if args.format == "csv" and (args.step is None or args.tokens or args.sample is not None or args.per_token):
        raise UsageError("--format csv writes a step's rows: give --step N (without --sample/--tokens/--per-token)")
    if args.step is None and (
        args.tokens or args.conversation or args.sample is not None or args.per_token or args.eval
    ):
        raise UsageError("--sample/--tokens/--conversation/--per-token/--eval need --step N")
    if args.conversation:
        if args.sample is None or args.tokens or args.format == "csv":
            raise UsageError("--conversation prints one sample's messages as JSON: give --sample I (not --tokens)")
        return
    if (args.tokens or args.sample is not None) and (args.sample is None or not args.tokens):
        raise UsageError("one sample's tokens need both --sample I and --tokens (or --conversation)")
    if (args.start is not None or args.end is not None) and not args.tokens:
        raise UsageError("--start/--end cut a token window: use them with --sample I --tokens")
    for flag, value in (("--start", args.start), ("--end", args.end)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} {value}: token positions count from 0 (the prompt's first token)")
    if args.start is not None and args.end is not None and args.start >= args.end:
        raise UsageError(f"--start {args.start} --end {args.end} is an empty window: --end must be above --start")


@_without_cyclic_gc
def run_export(args: argparse.Namespace) -> int:
    from miles_tui.core.commands import export
    from miles_tui.core.dump import Run, RunDir

    _check_export_options(args)
    RunDir(args.run_dir).require_dump_folder()
    if export_telemetry.wanted(args):
        return export_telemetry.run(args)
    now = time.time()
    if args.metrics is not None:
        from miles_tui.core.commands.export import write_metrics_export

        sys.stdout.flush()
        write_metrics_export(Path(args.run_dir), args.metrics, args.x, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return 0
    run = Run(args.run_dir, use_cache=not args.no_cache)
    if run.cache_notice is not None:
        print(f"miles-tui: note: {run.cache_notice}", file=sys.stderr)
    if args.step is None:
        _emit(export.step_list(run, now))
        return 0
    if args.conversation:
        _emit(export.conversation_export(run, args.step, args.eval, args.sample, now))
        return 0
    if args.tokens:
        _emit(
            export.tokens_export(
                run, args.step, args.eval, args.sample, now, args.start, args.end,
                warn=lambda message: print(inert(f"miles-tui: warning: {message}"), file=sys.stderr),
            )
        )  # fmt: skip
        return 0
    document = export.step_export(run, args.step, args.eval, now, per_token=args.per_token)
    _warn_problems(document)
    if args.format == "csv":
        sys.stdout.write(export.rows_csv(document))
    else:
        _emit(document)
    return 0


def run_report(args: argparse.Namespace) -> int:
    from miles_tui.core.commands.report import build_report, render_report
    from miles_tui.core.dump import RunDir

    for other in args.baseline:  # a mistyped --baseline is a command-line error, not a report without deltas
        try:
            RunDir(other).require_dump_folder()
        except RunDirError as err:
            print(inert(f"miles-tui: --baseline {err}"), file=sys.stderr)
            return 2
    try:
        report = build_report(
            Path(args.run_dir), time.time(), low_mfu_threshold=_low_mfu_threshold(args), quiet_ok=args.quiet_ok
        )
    except RunDirError as err:
        print(inert(f"miles-tui: {err}"), file=sys.stderr)
        return 3
    if report.cache_notice is not None:
        print(f"miles-tui: note: {report.cache_notice}", file=sys.stderr)
    if args.baseline:
        report = _with_baselines(report, args.baseline)
    if args.json:
        _emit(report.to_dict())
    else:
        sys.stdout.write(render_report(report))
    return report.exit_status


def _with_baselines(report: Any, paths: Sequence[str]) -> Any:
    """The report with its baselines' deltas; an unusable baseline is said on stderr (the report stands)."""
    import dataclasses

    from miles_tui.core.commands.baseline_report import baseline_entries

    latest = report.latest_summary.aggregate if report.latest_summary is not None else None
    entries = baseline_entries(paths, report.health.train, latest, time.time())
    for entry in entries:
        if entry.error is not None:
            print(inert(f"miles-tui: --baseline {entry.error} (reporting on RUN_DIR without it)"), file=sys.stderr)
    return dataclasses.replace(report, baselines=entries)


def run_monitor(args: argparse.Namespace) -> int:
    from miles_tui.tui.monitor import run_monitor as launch

    return launch(args)


def _guarded(action: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str) -> int:
    try:
        return action(args)
    except UsageError as err:
        print(f"{prog}: error: {err} (see {prog} --help)", file=sys.stderr)
        return EXIT_ERROR
    except StillWritingError as err:
        print(inert(f"miles-tui: {err}"), file=sys.stderr)
        return EXIT_STILL_WRITING
    except MilesTuiError as err:
        if args.debug:
            traceback.print_exc()
        print(inert(f"miles-tui: {err}"), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        print(
            inert(f"miles-tui: internal error: {type(err).__name__}: {err} (rerun with --debug and report it)"),
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | int:
    """Parsed arguments, or the exit status of --help, --version or a command line that does not parse."""
    try:
        return parser.parse_args(argv)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    no_huge_pages()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        parser = _export_parser() if argv[0] == "export" else _report_parser()
        args = _parse(parser, argv[1:])
        if isinstance(args, int):
            return args
        return _with_cache_flags(run_export if argv[0] == "export" else run_report, args, parser.prog)
    parser = _monitor_parser()
    args = _parse(parser, argv)
    if isinstance(args, int):
        return args
    if args.step is None and (args.sample is not None or args.eval):
        print("miles-tui: error: --sample and --eval go with --step N (e.g. --step 12 --sample 3)", file=sys.stderr)
        return EXIT_USAGE
    if args.run_dir is None and args.demo is None:
        print("miles-tui: error: give a RUN_DIR to monitor, or try `miles-tui --demo`", file=sys.stderr)
        return EXIT_USAGE
    if args.run_dir is not None and args.demo is not None:
        print(
            f"miles-tui: error: --demo writes its own run, so it takes no RUN_DIR ({args.run_dir!r}): "
            "give `miles-tui RUN_DIR` or `miles-tui --demo [DIR]`",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return _with_cache_flags(run_monitor, args, parser.prog)


if __name__ == "__main__":
    sys.exit(main())
