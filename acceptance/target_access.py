"""How a /metrics target is named and how it is reached: the URL every output shows (and the
store keys the target by), and the URL the collector fetches with the credential it sends.

A target's name is its URL with nothing secret in it (``shown_url``): a query parameter named
like a credential (token, key, secret, password, auth, signature, session...) keeps its name
and shows ``***`` for its value, and a URL's userinfo password shows ``***`` (config load
refuses a target with userinfo: it is never sent, so a user would believe a credential is in
use that is not). The fetch uses ``TargetAccess``: the full URL (a query token is part of what
the server asks for) and an ``Authorization`` header from a bearer token or a basic-auth
password that an environment variable holds. The header goes to that target's own URL only:
the fetcher follows no redirect (acceptance.fetch), so it never reaches another origin.

Limits: a secret in a query parameter whose name says nothing of it (``?x=...``) or in the
URL's path is not recognised; put credentials in an environment variable instead.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

MASK = "***"

# query parameter names that carry a credential, as services name them (access_token,
# api_key, X-Amz-Signature, sig, password, auth, session_id, ...)
_SECRET_NAME = re.compile(r"token|key|secret|passw|pwd|auth|credential|signature|\bsig\b|session|cookie",
                          re.IGNORECASE)


def _names_a_credential(name: str) -> bool:
    return bool(_SECRET_NAME.search(re.sub(r"[_\-.]", " ", name)))


def secret_query_values(url: str) -> tuple[str, ...]:
    """The values of ``url``'s query parameters named like a credential, as written in the URL
    (percent-encoded) and decoded: each is masked wherever it might be printed."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return ()
    out: list[str] = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if eq and value and _names_a_credential(name):
            out.append(value)
            decoded = parse_qsl(part, keep_blank_values=True)
            if decoded and decoded[0][1] != value:
                out.append(decoded[0][1])
    return tuple(v for v in out if v)


def userinfo_password(url: str) -> str | None:
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def has_userinfo(url: str) -> bool:
    """``url`` names a user or password before its host (``http://user:pw@host``)."""
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


def shown_url(url: str) -> str:
    """``url`` as every output shows it and the store keys it: the userinfo password and the
    values of credential-named query parameters as ***; anything else as written."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:{MASK}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query and secret_query_values(url):
        fields = []
        for part in query.split("&"):
            name, eq, value = part.partition("=")
            fields.append(f"{name}={MASK}" if eq and value and _names_a_credential(name) else part)
        query = "&".join(fields)
    if netloc == parts.netloc and query == parts.query:
        return url
    return parts._replace(netloc=netloc, query=query).geturl()


@dataclass(frozen=True)
class Credential:
    """An ``Authorization`` header value and what it is (``bearer`` or ``basic``); its repr and
    str never show the secret."""

    scheme: str
    header: str = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False, default=())

    @classmethod
    def bearer(cls, token: str) -> "Credential":
        return cls("bearer", f"Bearer {token}", (token,))

    @classmethod
    def basic(cls, username: str, password: str) -> "Credential":
        encoded = base64.b64encode(f"{username}:{password}".encode("utf-8")).decode("ascii")
        return cls("basic", f"Basic {encoded}", (password, encoded))

    def __str__(self) -> str:
        return f"{self.scheme} credential"


@dataclass(frozen=True)
class TargetAccess:
    """What the collector fetches for a target and sends with it: ``url`` in full (query
    tokens included) and the credential, if any. ``shown`` is the target's name."""

    url: str = field(repr=False)
    credential: Credential | None = None

    @property
    def shown(self) -> str:
        return shown_url(self.url)

    def headers(self) -> dict[str, str]:
        return {"Authorization": self.credential.header} if self.credential is not None else {}

    def secrets(self) -> tuple[str, ...]:
        """Every string of this access that no message may hold, longest first."""
        found = [*secret_query_values(self.url), userinfo_password(self.url) or ""]
        if self.credential is not None:
            found += [*self.credential.secrets, self.credential.header]
        return tuple(sorted({s for s in found if s}, key=len, reverse=True))

    def scrub(self, text: str) -> str:
        """``text`` with the full URL shown as its name and every secret as ***."""
        text = text.replace(self.url, self.shown)
        for secret in self.secrets():
            text = re.sub(re.escape(secret), MASK, text, flags=re.IGNORECASE)
        return text


def scrub_url_secrets(text: str, url: str) -> str:
    """``text`` with ``url`` shown as ``shown_url(url)`` and its secrets masked."""
    return TargetAccess(url).scrub(text)
