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
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.errors import MilesTuiError, RunDirError, StillWritingError

EXIT_ERROR = 1
EXIT_STILL_WRITING = 75
"""sysexits' EX_TEMPFAIL: the step is still being written; try again shortly."""

SUBCOMMANDS = ("export", "report")


def _export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="miles-tui export",
        description="Print a run's steps, a step's samples, or one sample's tokens as JSON (or CSV).",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--step", type=int, metavar="N", help="the step (rollout id) to export")
    parser.add_argument("--eval", action="store_true", help="the evaluation batch taken at step N")
    parser.add_argument("--per-token", action="store_true", help="add each sample's resolved per-token arrays")
    parser.add_argument("--sample", type=int, metavar="I", help="a sample index (with --tokens)")
    parser.add_argument("--tokens", action="store_true", help="print one sample's token payload")
    parser.add_argument("--start", type=int, metavar="A", help="first token position (with --tokens)")
    parser.add_argument("--end", type=int, metavar="B", help="end token position, exclusive (with --tokens)")
    parser.add_argument("--metrics", nargs="*", metavar="KEY", help="metric series from dashboard/metrics.jsonl")
    parser.add_argument("--x", metavar="STEP_KEY", help="the step key to plot metrics against")
    parser.add_argument("--format", choices=("json", "csv"), default="json")
    _cache_flags(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="miles-tui report", description="Summarize a run's health.")
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    _cache_flags(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


def _monitor_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="miles-tui",
        description="Monitor a miles --dump-details run directory live in the terminal.",
        epilog="Headless: `miles-tui export RUN_DIR ...` and `miles-tui report RUN_DIR` "
        "(a run dir literally named export/report is given as ./export).",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="?")
    parser.add_argument("--no-follow", action="store_true", help="read once; do not poll for new data")
    parser.add_argument("--poll", type=float, default=2.0, metavar="SECONDS", help="poll interval (default 2)")
    parser.add_argument(
        "--demo",
        nargs="?",
        const="",
        metavar="DIR",
        help="write a synthetic live run into DIR (a temp dir if omitted) and monitor it",
    )
    _cache_flags(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    return parser


# -- cache flags (every command): core/cache_dir.py holds the switch and the cap -------------------------


def _cache_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache", action="store_true", help="read and write no cache (step summaries, telemetry columns)"
    )
    parser.add_argument(
        "--cache-max",
        metavar="SIZE",
        help="cap on the cache folder, least recently used first out (default 2G, or $MILES_TUI_CACHE_MAX_BYTES)",
    )


def _with_cache_flags(action: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command with its --no-cache/--cache-max in force (restored after, for in-process callers)."""
    from core import cache_dir

    try:
        cap = None if args.cache_max is None else cache_dir.parse_size(args.cache_max)
    except ValueError as err:
        raise SystemExit(f"miles-tui: --cache-max: {err}") from None
    with cache_dir.configured(off=args.no_cache, cap=cap):
        return _guarded(action, args)


# ---------------------------------------------------------------------------------------------------------


def _emit(document: Any) -> None:
    sys.stdout.write(json.dumps(document, allow_nan=False))
    sys.stdout.write("\n")


def _warn_problems(document: dict[str, Any]) -> None:
    for problem in document.get("problems", []):
        if problem["kind"] == "still_writing":
            print(f"miles-tui: note: {problem['message']}", file=sys.stderr)
        else:
            print(
                f"miles-tui: warning: {problem['message']}; samples it held are marked alignment_failed",
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


@_without_cyclic_gc
def run_export(args: argparse.Namespace) -> int:
    from core import export
    from core.run import Run

    now = time.time()
    if args.metrics is not None:
        from core.export import write_metrics_export

        sys.stdout.flush()
        write_metrics_export(Path(args.run_dir), args.metrics, args.x, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return 0
    run = Run(args.run_dir, use_cache=not args.no_cache)
    if args.step is None:
        if args.tokens or args.sample is not None or args.per_token or args.eval:
            raise SystemExit("miles-tui export: --sample/--tokens/--per-token/--eval need --step N")
        _emit(export.step_list(run, now))
        return 0
    if args.tokens or args.sample is not None:
        if args.sample is None or not args.tokens:
            raise SystemExit("miles-tui export: one sample's tokens need both --sample I and --tokens")
        _emit(export.tokens_export(run, args.step, args.eval, args.sample, now, args.start, args.end))
        return 0
    document = export.step_export(run, args.step, args.eval, now, per_token=args.per_token)
    _warn_problems(document)
    if args.format == "csv":
        sys.stdout.write(export.rows_csv(document))
    else:
        _emit(document)
    return 0


def run_report(args: argparse.Namespace) -> int:
    from core.report import build_report, render_report

    try:
        report = build_report(Path(args.run_dir), time.time())
    except RunDirError as err:
        print(f"miles-tui: {err}", file=sys.stderr)
        return 3
    if args.json:
        _emit(report.to_dict())
    else:
        sys.stdout.write(render_report(report))
    return report.exit_status


def run_monitor(args: argparse.Namespace) -> int:
    from tui.monitor import run_monitor as launch

    return launch(args)


def _guarded(action: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return action(args)
    except StillWritingError as err:
        print(f"miles-tui: {err}", file=sys.stderr)
        return EXIT_STILL_WRITING
    except MilesTuiError as err:
        if args.debug:
            traceback.print_exc()
        print(f"miles-tui: {err}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        print(
            f"miles-tui: internal error: {type(err).__name__}: {err} (rerun with --debug and report it)",
            file=sys.stderr,
        )
        return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "export":
        return _with_cache_flags(run_export, _export_parser().parse_args(argv[1:]))
    if argv and argv[0] == "report":
        return _with_cache_flags(run_report, _report_parser().parse_args(argv[1:]))
    args = _monitor_parser().parse_args(argv)
    if args.run_dir is None and args.demo is None:
        _monitor_parser().print_usage(sys.stderr)
        print("miles-tui: give a RUN_DIR, or try `miles-tui --demo`", file=sys.stderr)
        return 2
    return _with_cache_flags(run_monitor, args)


if __name__ == "__main__":
    sys.exit(main())
