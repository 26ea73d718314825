"""``tcmqa serve``: run the leaderboard Space locally, on ``--store``, else ``TCMQA_STORE`` like the app,
else the embedded SQLite store in ``.cache/space``.

The Space's entry point is ``space/app.py`` of a source checkout (it deploys to the Space repo on its
own; the UI and its logic are ``tcmqa.leaderboard``). This command sets the app's environment and runs it;
the app also starts one worker. It listens on 127.0.0.1; another host is refused unless ``TCMQA_ADMIN_TOKEN``
is set (local mode's identity: :mod:`tcmqa.leaderboard.identity`).
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path

from tcmqa.leaderboard.identity import ADMIN_TOKEN_VAR, check_bind

DEFAULT_APP = Path("space") / "app.py"  # relative to the working directory: run from a checkout
DEFAULT_STORE = ".cache/space"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", type=Path, default=DEFAULT_APP, help="the Space's app.py (default: ./space/app.py)")
    # no default shown: TCMQA_STORE may be a database URL with its password
    parser.add_argument(
        "--store", help=f"store: a SQLite directory or a database URL (default: $TCMQA_STORE or {DEFAULT_STORE})"
    )
    parser.add_argument("--data", default="TechTCM/TCMQA", help="Hub id or a tree built by `tcmqa build`")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface to listen on; beyond loopback only with TCMQA_ADMIN_TOKEN set (tcmqa.leaderboard.identity)",
    )
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--no-worker", action="store_true", help="do not start a worker next to the app")
    parser.add_argument(
        "--worker-args", default="", help="extra `tcmqa worker` flags, e.g. '--engine transformers --limit 50'"
    )


def main(args: argparse.Namespace) -> int:
    if not args.app.is_file():
        print(f"no Space app at {args.app}: run from a source checkout or pass --app", file=sys.stderr)
        return 2
    try:
        check_bind(args.host, os.environ.get(ADMIN_TOKEN_VAR))
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    os.environ.pop("SPACE_ID", None)  # local mode
    os.environ.update(
        TCMQA_STORE=args.store or os.environ.get("TCMQA_STORE") or DEFAULT_STORE,
        TCMQA_DATA=args.data,
        TCMQA_WORKER_ARGS=args.worker_args,
        TCMQA_START_WORKER="0" if args.no_worker else "1",
        GRADIO_SERVER_NAME=args.host,
        GRADIO_SERVER_PORT=str(args.port),
    )
    runpy.run_path(str(args.app), run_name="__main__")
    return 0
