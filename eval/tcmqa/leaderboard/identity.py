"""Who is calling: the one guard every handler of the Space goes through, and where local mode may listen.

Gradio runs any registered function for whoever posts its index to ``/gradio_api/queue/join``, whatever its
``api_name``, so the identity of a caller is decided here, from what the call itself carries, never from
where the page came from:

- **Hosted** (a Space): the signed-in Hugging Face account (gradio's OAuth profile); admins are the
  accounts in ``TCMQA_ADMINS``.
- **Local**: a typed name is an account only with its key. A practitioner's key is a random secret issued
  by the name's first start and kept by that browser (localStorage); the store keeps its SHA-256 only. An
  admin's key is the operator's ``TCMQA_ADMIN_TOKEN``; without one set, local mode has no admin.

A handler is declared with its access: :meth:`Guard.public` (read-only views and the Submit form, open to
anyone), :meth:`Guard.practitioner` (:meth:`Guard.background` for the heartbeat), :meth:`Guard.starting` or
:meth:`Guard.admin`. All but the first take the name, the key and the profile from the call and hand the
function the proven account (None for an anonymous caller, whom the function refuses as it always did); a
caller who names an account without its key is refused with :class:`NotProven` before the function runs.

Local mode binds the loopback interface; :func:`check_bind` refuses any other host unless the operator
set ``TCMQA_ADMIN_TOKEN`` (then admin actions, and every practitioner's session, need their secrets).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import inspect
import ipaddress
import secrets
import unicodedata
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import gradio as gr

from tcmqa.leaderboard.visitor import visitor_safe

Handler = TypeVar("Handler", bound=Callable[..., Any])
ADMIN_TOKEN_VAR = "TCMQA_ADMIN_TOKEN"
MIN_TOKEN_CHARS = 16
MAX_NAME_CHARS = 100
MAX_KEY_CHARS = 200
ACCESS = "__tcmqa_access__"  # the attribute that records a handler's declared access (what the tests read)


class KeyStore(Protocol):
    """The store's part the guard needs (tcmqa.store.keys)."""

    def practitioner_key_digest(self, account: str) -> str | None: ...

    def bind_practitioner_key(self, account: str, digest: str) -> bool: ...


class NotProven(gr.Error):
    """The caller named an account without the secret that proves it: said to the caller, nothing done."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def check_admin_token(token: str | None) -> str | None:
    """The operator's token as set (None when unset); a short one is refused: it must not be guessable."""
    token = (token or "").strip() or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"{ADMIN_TOKEN_VAR} is {len(token)} characters; use at least {MIN_TOKEN_CHARS}, e.g. the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe())'"
        )
    return token


def check_bind(host: str, admin_token: str | None) -> None:
    """Refuse to serve local mode beyond this machine without an operator's token (a ValueError that says how)."""
    if is_loopback(host) or check_admin_token(admin_token):
        return
    raise ValueError(
        f"refusing to serve local mode on {host!r}: beyond 127.0.0.1 anyone who reaches the port would act as "
        f"admin. Set {ADMIN_TOKEN_VAR} (at least {MIN_TOKEN_CHARS} characters; admins then enter it as their key) "
        "or serve on --host 127.0.0.1."
    )


def new_key() -> str:
    """A practitioner's key: 144 random bits, URL-safe."""
    return secrets.token_urlsafe(18)


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _typed(text: str | None, what: str, limit: int) -> str:
    """A typed name or key, stripped; refused (before any store call) when too long or holding control characters."""
    text = (text or "").strip()
    if len(text) > limit:
        raise NotProven(f"❌ The {what} is longer than {limit} characters.")
    if any(unicodedata.category(c).startswith("C") for c in text):
        raise NotProven(f"❌ The {what} holds control characters.")
    return text


class Guard:
    """The identity rule of one Space (hosted or local, its admins, the operator's token, the keys' store)."""

    def __init__(
        self,
        *,
        hosted: bool,
        admins: tuple[str, ...],
        admin_token: str | None,
        store: KeyStore,
    ):
        self.hosted, self.admins, self.store = hosted, admins, store
        self.admin_token = check_admin_token(admin_token)

    # -- the rule -------------------------------------------------------------------------------------------
    def account(self, name: str | None, key: str | None, profile: gr.OAuthProfile | None) -> str | None:
        """The caller's proven account; None for an anonymous caller; :class:`NotProven` for a name without its key."""
        return self._prove(name, key, profile, issue=False)[0]

    def claim(
        self, name: str | None, key: str | None, profile: gr.OAuthProfile | None
    ) -> tuple[str | None, str | None]:
        """Like :meth:`account`, for a start: a local name that has no key yet gets one, returned beside it."""
        return self._prove(name, key, profile, issue=True)

    def admin_account(self, name: str | None, key: str | None, profile: gr.OAuthProfile | None) -> str | None:
        """The caller's account if it is a proven admin, else None."""
        if self.hosted:
            who = profile.username if profile is not None else None
            return who if who in self.admins else None
        name = _typed(name, "name", MAX_NAME_CHARS)
        return self._admin(name, key) if name in self.admins else None

    def _admin(self, name: str, key: str | None) -> str:
        if self.admin_token is None:
            raise NotProven(
                "❌ This is an admin account: in local mode admin actions need the operator's token, and none is "
                f"set ({ADMIN_TOKEN_VAR} where the Space is started)."
            )
        if not hmac.compare_digest(digest(_typed(key, "key", MAX_KEY_CHARS)), digest(self.admin_token)):
            raise NotProven(f"❌ This is an admin account: enter the operator's token ({ADMIN_TOKEN_VAR}) as the key.")
        return name

    def _prove(
        self, name: str | None, key: str | None, profile: gr.OAuthProfile | None, *, issue: bool
    ) -> tuple[str | None, str | None]:
        if self.hosted:  # the signed-in Hugging Face account, never a name the browser sends
            return (profile.username if profile is not None else None), None
        name = _typed(name, "name", MAX_NAME_CHARS)
        if not name:
            return None, None
        if name in self.admins:
            return self._admin(name, key), None
        key = _typed(key, "key", MAX_KEY_CHARS)
        stored = self.store.practitioner_key_digest(name)
        if stored is None and issue:
            issued = new_key()
            if self.store.bind_practitioner_key(name, digest(issued)):
                return name, issued
            stored = self.store.practitioner_key_digest(name)  # another first start bound it a moment ago
        if stored is not None and key and hmac.compare_digest(digest(key), stored):
            return name, None
        raise NotProven(
            "❌ Not signed in under this name: a name is resumed only with the key its first start gave (that "
            "browser keeps it; on another device enter it in the key field). A new name: press Start."
        )

    # -- the declarations -----------------------------------------------------------------------------------
    def public(self, fn: Handler) -> Handler:
        """What anyone may call: a read-only view, or the Submit form (hosted: the form checks the sign-in); nothing
        of a practitioner's, no answer recorded, no admin action."""
        return _declared(visitor_safe(fn), "public")

    def practitioner(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(who, *rest)`` called as ``(name, key, *rest, profile)``; ``who`` proven, or None (anonymous)."""
        return self._wrap(fn, "practitioner", lambda name, key, profile: (self.account(name, key, profile),))

    def background(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """As :meth:`practitioner`, for what the page calls by itself (the heartbeat, while a name is being typed):
        a name without its key is handed None, with no refusal to show."""
        return self._wrap(fn, "practitioner", self._quietly)

    def _quietly(self, name: str | None, key: str | None, profile: gr.OAuthProfile | None) -> tuple[str | None]:
        try:
            return (self.account(name, key, profile),)
        except NotProven:
            return (None,)

    def starting(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(who, issued, *rest)``: as :meth:`practitioner`, with the key a new name was just issued (else None)."""
        return self._wrap(fn, "starting", self.claim, taken=2)

    def admin(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn(admin, *rest)`` called as ``(name, key, *rest, profile)``; ``admin`` a proven admin, or None."""
        return self._wrap(fn, "admin", lambda name, key, profile: (self.admin_account(name, key, profile),))

    def _wrap(
        self,
        fn: Callable[..., Any],
        access: str,
        prove: Callable[[Any, Any, Any], tuple[Any, ...]],
        taken: int = 1,
    ) -> Callable[..., Any]:
        """``fn`` behind the proof: gradio sees ``(name, key, *rest, profile)`` (the profile injected by its type)."""

        @functools.wraps(fn)
        def proven(name: Any, key: Any, *rest: Any) -> Any:
            *rest, profile = rest
            return fn(*prove(name, key, profile), *rest)

        guarded = visitor_safe(proven)  # a failure of the proof too reaches the visitor as its kind and an id
        rest = list(inspect.signature(fn).parameters.values())[taken:]
        plain = inspect.Parameter.POSITIONAL_OR_KEYWORD
        guarded.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [
                inspect.Parameter("name", plain),
                inspect.Parameter("key", plain),
                *rest,
                inspect.Parameter("profile", plain, annotation=gr.OAuthProfile | None),
            ]
        )
        guarded.__annotations__ = {"profile": gr.OAuthProfile | None}
        del guarded.__wrapped__  # gradio reads the signature above, not fn's
        return _declared(guarded, access)


def _declared(fn: Handler, access: str) -> Handler:
    setattr(fn, ACCESS, access)
    return fn
