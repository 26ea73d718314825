"""The ``tcmqa`` command: one sub-command per stage of the data flow.

Each stage lives in its own module, which exposes ``add_arguments(parser)`` and ``main(args)``;
modules are imported only when their command runs, so ``tcmqa build`` never loads an engine.
A command's own output (a results row, a build summary) goes to stdout; diagnostics go through
``logging`` to stderr, at INFO by default, DEBUG with ``-v`` and WARNING with ``-q`` (other libraries
log at WARNING).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMANDS: dict[str, tuple[str, str]] = {
    "build": ("tcmqa.build", "build every config from raw sources into a Hub repo tree"),
    "publish": ("tcmqa.publish", "validate a built tree and upload it to the Hub in one commit"),
    "eval": ("tcmqa.harness", "evaluate a model under the frozen protocol"),
    "probe": ("tcmqa.probes.run", "probe a finished run: option rotations and the option-order (memorisation) test"),
    "merge": ("tcmqa.merge", "join the run folders of `tcmqa eval --shard I/N` into one run"),
    "report": ("tcmqa.report", "write every table and figure of the paper"),
    "import-samples": (
        "tcmqa.import_samples",
        "an lm-eval or lighteval run of the TCMQA tasks as a run folder (self-reported, never published)",
    ),
    "simulate": ("tcmqa.simulate", "write a full-scale SIMULATED study in the real schemas"),
    "serve": ("tcmqa.serve", "run the leaderboard Space locally (with a worker)"),
    "worker": ("tcmqa.worker", "claim and run queued evaluations"),
    "errata": ("tcmqa.adjudication", "export the adjudicated keys of a store as an errata file"),
    "pool": ("tcmqa.fresh.cli", "the fresh pool: status, import externally written items, retire items to the public"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tcmqa", description=__doc__.splitlines()[0])
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="store_true", help="debug diagnostics")
    verbosity.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = parser.add_subparsers(dest="command", required=True)
    argv = sys.argv[1:] if argv is None else argv
    wanted = next((a for a in argv if not a.startswith("-")), None)  # the command follows -v/-q
    for name, (module, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if name == wanted:  # import only the module that runs
            mod = importlib.import_module(module)
            mod.add_arguments(command)
            command.set_defaults(run=mod.main)
    args = parser.parse_args(argv)
    # The project's diagnostics at the chosen level; other libraries' (matplotlib, httpx, ...) at WARNING.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("tcmqa").setLevel(
        logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    )
    return int(args.run(args) or 0)
