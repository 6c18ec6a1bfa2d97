"""The ``dispatcher`` command: run, demo, explain, sim, db (and more as they land).

Errors a user can fix (bad configuration, unreachable database, bad arguments) are printed as one
clear line and exit with status 2; nothing here prints a traceback for them.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from .common import UsageError
from .parser import build_parser

__all__ = ["UsageError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except UsageError as exc:
        print(f"dispatcher: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
