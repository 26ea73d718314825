"""The one rule for a command's ``--out`` folder: new or empty, or an earlier output of the same command, replaced.

``tcmqa build``, ``report`` and ``simulate`` each write a whole folder. Run twice into the same ``--out`` (as
the README's quickstart invites), the second run replaces what the first wrote: the folder holds the command's
``marker`` file, and only the ``parts`` the command writes are removed (anything else there is left alone).
A non-empty folder without the marker is someone else's, and is refused before anything is written.
``tcmqa eval`` and ``tcmqa merge`` refuse a folder holding a run instead (``--resume`` continues one).
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path


def replace_output(out: str | Path, marker: str, parts: Sequence[str], command: str) -> Path:
    """``out`` ready to be written by ``command``: created if missing; an earlier output (it holds ``marker``)
    has its ``parts`` removed; a non-empty folder without ``marker``, or a file, is refused (SystemExit)."""
    folder = Path(out).expanduser()
    if folder.exists() and not folder.is_dir():
        raise SystemExit(f"{command}: --out {folder} is a file; give a folder (new, empty, or an earlier output)")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / marker).exists():
        raise SystemExit(
            f"{command}: --out {folder} is not empty and holds no earlier output of {command} (no {marker}); "
            "give a new or empty folder (an earlier output there is replaced)"
        )
    for part in (folder / p for p in parts):
        if part.is_dir() and not part.is_symlink():
            shutil.rmtree(part)
        elif part.exists() or part.is_symlink():
            part.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    return folder
