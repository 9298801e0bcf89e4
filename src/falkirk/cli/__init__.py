"""The ``falkirk`` command line.

Each subcommand is a module ``falkirk.cli.<name>`` listed in :data:`COMMANDS`
that exposes ``register(subparsers)``: it adds its parser and sets
``run=<function(args) -> int>`` as a default. Adding a command is one new
module plus one entry in :data:`COMMANDS`.

:func:`main` turns every :class:`~falkirk.errors.FalkirkError`, unreadable
file or invalid JSON into one line on stderr,
``falkirk: error: <where>: <message>``, and exit status 2 (1 when the
environment lacks something, e.g. matplotlib for ``draw``); it never shows a
traceback for bad input. Packages add commands through the ``falkirk.cli``
entry point group (a module with ``register(subparsers)``): ``falkirk.spark``
adds ``pipeline``.

>>> main(["check", "/nonexistent/scenario.json"])
2
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from falkirk import __version__
from falkirk.cli._common import CommandError, report
from falkirk.errors import FalkirkError

__all__ = ["COMMANDS", "build_parser", "main"]

#: Subcommand modules, in the order ``falkirk --help`` lists them.
COMMANDS: list[str] = ["solve", "check", "explain", "draw", "gc", "monitor"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every command of :data:`COMMANDS` registered."""
    parser = argparse.ArgumentParser(
        prog="falkirk",
        description="Rollback plans for dataflow systems (the Falkirk Wheel framework). "
        "Scenario files follow the falkirk-scenario/1 format (SPEC §9).",
    )
    parser.add_argument("--version", action="version", version=f"falkirk {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    for plugin in entry_points(group="falkirk.cli"):  # e.g. falkirk.spark's ``pipeline`` command
        try:
            plugin.load().register(subparsers)
        except ImportError as exc:  # its extra is not installed: the command says so when called
            stub = subparsers.add_parser(plugin.name, help=f"(unavailable: {exc})")
            stub.set_defaults(run=_unavailable(plugin.name, exc))
    return parser


def _unavailable(name: str, exc: ImportError) -> Any:
    def run(args: argparse.Namespace) -> int:
        raise CommandError(
            f"the {name!r} command needs a package that is not installed ({exc}); "
            "install falkirk with its extra, e.g. pip install 'falkirk[spark]'"
        )

    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``falkirk`` command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error (already printed)
        return exc.code if isinstance(exc.code, int) else 2
    source = getattr(args, "file", None)
    try:
        status = int(args.run(args))
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return status
    except BrokenPipeError:  # `falkirk ... | head`: the reader went away; say nothing, as Unix tools do
        _quiet_stdout()
        return 128 + 13  # killed by SIGPIPE, as the shell reports it
    except FalkirkError as exc:
        report(exc, source)
        return 2
    except CommandError as exc:
        report(exc, None)
        return exc.status
    except OSError as exc:
        report(exc, source)
        return 2


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's captured stdout): nothing to flush at exit
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
