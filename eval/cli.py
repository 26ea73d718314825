"""The ``tcmqa`` command: one sub-command per stage of the data flow.

Each stage lives in its own module, which exposes ``add_arguments(parser)`` and ``main(args)``;
modules are imported only when their command runs, so ``tcmqa build`` never loads an engine.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "build": ("tcmqa.build", "build every config from raw sources into a Hub repo tree"),
    "publish": ("tcmqa.publish", "validate a built tree and upload it to the Hub in one commit"),
    "eval": ("tcmqa.harness", "evaluate a model under the frozen protocol"),
    "report": ("tcmqa.report", "write every table and figure of the paper"),
    "simulate": ("tcmqa.simulate", "write a full-scale SIMULATED study in the real schemas"),
    "serve": ("tcmqa.serve", "run the leaderboard Space locally (with a worker)"),
    "worker": ("tcmqa.worker", "claim and run queued evaluations"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tcmqa", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    argv = sys.argv[1:] if argv is None else argv
    wanted = argv[0] if argv and argv[0] in COMMANDS else None
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if name == wanted:  # import only the module that runs
            mod = importlib.import_module(module)
            mod.add_arguments(command)
            command.set_defaults(run=mod.main)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
