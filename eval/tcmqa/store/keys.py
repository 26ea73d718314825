"""Local mode's practitioner keys: the digest of the secret each account's first start issued.

Only digests are stored (the keys are random, so a plain SHA-256 suffices); the rule of who holds an
account is :mod:`tcmqa.leaderboard.identity`'s. Binding is one insert, so two first starts of the same
name at once bind one key and the other is refused.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from tcmqa.store.core import StoreCore
from tcmqa.store.tables import practitioner_keys_t


class KeysStore(StoreCore):
    def practitioner_key_digest(self, account: str) -> str | None:
        """The digest of the account's key; None while it has none."""
        with self._read() as conn:
            query = sa.select(practitioner_keys_t.c.key_digest).where(practitioner_keys_t.c.account == account)
            return conn.execute(query).scalar()

    def bind_practitioner_key(self, account: str, digest: str) -> bool:
        """Give the account the key of ``digest`` if it has none yet; False (nothing changed) if it has one."""
        try:
            with self._write() as conn:
                conn.execute(
                    sa.insert(practitioner_keys_t).values(account=account, key_digest=digest, issued_at=time.time())
                )
        except IntegrityError:
            return False
        return True
