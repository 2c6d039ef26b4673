"""Database URLs in messages, banners and logs: never a credential, whatever the URL's shape — pure.

A URL may carry secrets in three places: the password of ``user:password@host``, query parameters that libpq
reads as credentials (``?password=``, ``sslpassword``, ...), and — when the password holds an unencoded ``@``,
``:`` or ``/`` — anywhere after ``://``, because no parser can tell where it ends. ``redact_url`` therefore
shows only what SQLAlchemy's ``make_url`` parses back to exactly the text given, and never the user name,
password or query; ``scrub`` removes every string that might be a secret from a driver's error text (psycopg
quotes host, port and user name, never the password), and withholds the text entirely for an ambiguous URL,
whose parsed "host" or "database" may be made of pieces of the password.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

from sqlalchemy.engine import URL, make_url

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# Query keys read as secrets by libpq / psycopg and other drivers (substring match, lower case).
_SECRET_KEYS = ("pass", "secret", "token", "key", "cred")
MASK = "***"
NOT_A_URL = "(database URL not shown: not of the form dialect+driver://...)"
AMBIGUOUS = "the URL does not parse unambiguously; percent-encode @ : / ? # in the password"


def _scheme(url: str) -> str | None:
    scheme, sep, _ = url.partition("://")
    return scheme if sep and _SCHEME.fullmatch(scheme) else None


def _parse(url: str) -> URL | None:
    try:
        return make_url(url)
    except Exception:  # ArgumentError, ValueError (a port that is not a number), anything a new version raises
        return None


def _unambiguous(url: str) -> URL | None:
    """The parsed URL when there is only one way to read it, else None: then a password with an unencoded
    ``@ ? #`` may have leaked into the "host" or "database" a driver quotes.

    One way means: at most one ``@`` before the query, and ``make_url`` renders it back to the text given
    (query aside, both percent-decoded, so ``%21`` for ``!`` is fine). SQLite paths without user info always are.
    """
    if _scheme(url) is None:
        return None
    parsed = _parse(url)
    if parsed is None:
        return None
    if parsed.get_backend_name() == "sqlite" and not (parsed.username or parsed.password):
        return parsed
    given = url.split("?", 1)[0]
    rendered = parsed.set(query={}).render_as_string(hide_password=False)
    if given.count("@") > 1 or unquote(rendered) != unquote(given):
        return None
    return parsed


def is_unambiguous(url: str) -> bool:
    """Whether ``url`` parses one way only (see ``_unambiguous``); ``make_engine`` refuses the others."""
    return _unambiguous(url) is not None


def redact_url(url: str) -> str:
    """``url`` fit to print: ``dialect+driver://***@host:port/database`` (``***@`` only when the URL carries a
    user or password; never the query), SQLite as ``sqlite:///path``.

    A URL that does not parse back to exactly the given text (an unencoded ``@ : /`` in the password, a port
    that is not a number, stray spaces) is shown as its scheme only, since any other part may hold the password;
    a string without a scheme is not shown at all.
    """
    scheme = _scheme(url)
    if scheme is None:
        return NOT_A_URL
    parsed = _unambiguous(url)
    if parsed is None:
        return f"{scheme}://(rest not shown: {AMBIGUOUS})"
    userinfo = f"{MASK}@" if parsed.username or parsed.password else ""
    if parsed.get_backend_name() == "sqlite" and not userinfo:
        return f"{scheme}:///{parsed.database}" if parsed.database else f"{scheme}://"
    host = parsed.host or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parsed.port}" if parsed.port is not None else ""
    database = f"/{parsed.database}" if parsed.database else ""
    return f"{scheme}://{userinfo}{host}{port}{database}"


def secrets_in(url: str) -> list[str]:
    """Every substring of ``url`` that may be a credential, longest first: the parsed password, the raw text
    between the first ``:`` of the user info and the last ``@`` (and its decoded form), and the values of
    secret-looking query parameters."""
    found: set[str] = set()
    parsed = _parse(url)
    if parsed is not None and parsed.password:
        found.add(str(parsed.password))
    rest = url.partition("://")[2] or url
    if "@" in rest:
        userinfo = rest.rsplit("@", 1)[0]
        if ":" in userinfo:
            raw = userinfo.split(":", 1)[1]
            found.update({raw, unquote(raw)})
    query = url.split("?", 1)[1] if "?" in url else ""
    for key, value in parse_qsl(query, keep_blank_values=False):
        if any(k in key.lower() for k in _SECRET_KEYS):
            found.update({value, unquote(value)})
    return sorted((s for s in found if s), key=len, reverse=True)


def scrub(text: str, url: str) -> str:
    """``text`` with every possible credential of ``url`` (see ``secrets_in``) replaced by ``***``.

    For a URL that does not parse unambiguously the whole text is withheld: the driver may quote a "host" or
    "database" made of pieces of the password, which no replacement can find.
    """
    if _unambiguous(url) is None:
        return f"(the driver's message is not shown: {AMBIGUOUS})"
    for secret in secrets_in(url):
        text = text.replace(secret, MASK)
    return text
