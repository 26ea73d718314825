"""What the publisher holds back of a job's parts: the rows of items in open practice blocks and of the hidden pool.

Nothing of a block still being answered leaves the store (:func:`tcmqa.leaderboard.practice.core.open_block_items`,
the one rule), so a job's outputs and probe rows of those items are cut from its parts before they are committed;
which items each published job left out is kept in the store's state (:data:`WITHHELD_STATE`), and a job whose
left-out items are no longer open is queued again (``Store.republish``), its parts then committed again in full.
A part that holds no such item is committed as it was stored (the bytes untouched, nothing parsed while no block
is open beyond reading its ``item_id`` column).
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcmqa.hub.committer import Committer
from tcmqa.leaderboard.practice.core import open_block_items
from tcmqa.store.pool import RETIRED

log = logging.getLogger("tcmqa.hub")

WITHHELD_STATE = "hub.outputs.withheld"  # store state: {job id: [item ids left out of its published parts]}


def without_items(data: bytes, items: set[str]) -> tuple[bytes, set[str]]:
    """A Parquet part (outputs or probes) without the rows of ``items``, and which of them it held; the bytes
    as stored when it holds none."""
    if not items:
        return data, set()
    held = set(pq.read_table(io.BytesIO(data), columns=["item_id"]).column("item_id").to_pylist()) & items
    if not held:
        return data, set()
    table = pq.read_table(io.BytesIO(data))
    keep = pc.invert(pc.is_in(table.column("item_id"), value_set=pa.array(sorted(held), pa.string())))
    sink = io.BytesIO()
    pq.write_table(table.filter(keep), sink)
    return sink.getvalue(), held


def hidden_pool_items(store: Any) -> set[str]:
    """Every fresh pool item not retired (a draft, in review, accepted or rejected): hidden, never published."""
    return {item.id for item in store.fresh_items() if item.state != RETIRED}


class WithheldParts(Committer):
    """The publisher's bookkeeping of rows held back for open practice blocks (a part of ``Publisher``)."""

    def _open_items(self) -> set[str]:
        """The items none of whose rows are published now: those of open practice blocks, and every pool item
        not retired (a job's parts never hold the pool's outputs, which stay in its run folder's hidden part;
        this rule holds should a part ever hold one)."""
        return open_block_items(self.store, self.raters) | hidden_pool_items(self.store)

    def _withheld(self) -> dict[str, list[str]]:
        return json.loads(self.store.get_state(WITHHELD_STATE) or "{}")

    def _release_withheld(self) -> None:
        """Queue again every published job some of whose left-out items are no longer open."""
        withheld = self._withheld()
        if not withheld:
            return
        still_open = self._open_items()
        due = sorted(job for job, items in withheld.items() if not set(items) <= still_open)
        if not due:
            return
        self.store.republish(due)  # first: a crash before the state is saved only queues them again
        self.store.set_state(WITHHELD_STATE, json.dumps({j: i for j, i in withheld.items() if j not in due}))
        log.info("publishing %d job(s) again: items they left out for open practice blocks are released", len(due))

    def _keep_withheld(self, left_out: dict[str, set[str]]) -> None:
        """Record which items each job about to be committed leaves out (before the commit: a job recorded but
        not committed is only queued again)."""
        withheld = self._withheld()
        changed = False
        for job, items in left_out.items():
            if items:
                withheld[job] = sorted(items)
                changed = True
            elif job in withheld:
                del withheld[job]
                changed = True
        if changed:
            self.store.set_state(WITHHELD_STATE, json.dumps(withheld))
