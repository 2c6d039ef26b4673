"""Database URLs in messages: ``redact_url`` and ``scrub`` never let a credential through, whatever the shape."""

from __future__ import annotations

import pytest

from orchestrator.store.urls import NOT_A_URL, redact_url, scrub, secrets_in

SECRET = "S3cr3tPw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql+psycopg://orch:S3cr3tPw@db.example:5432/orch", "postgresql+psycopg://***@db.example:5432/orch"),
        ("postgresql+psycopg://orch@db.example/orch", "postgresql+psycopg://***@db.example/orch"),
        ("postgresql://db.example/orch", "postgresql://db.example/orch"),
        ("postgresql+psycopg://orch:S3%40cr3tPw@[::1]:5432/orch", "postgresql+psycopg://***@[::1]:5432/orch"),
        ("postgresql+psycopg://orch:S3cr3tPw@db.example/orch?sslmode=require&sslpassword=S3cr3tPw",
         "postgresql+psycopg://***@db.example/orch"),
        ("sqlite:///./orch.db", "sqlite:///./orch.db"),
        ("sqlite:////abs/path/orch.db?mode=ro", "sqlite:////abs/path/orch.db"),
        ("sqlite://", "sqlite://"),
    ],
)  # fmt: skip
def test_redact_keeps_the_address_and_drops_the_user_info_and_query(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# Shapes where a parser cannot know where the password ends, or cannot parse at all.
UGLY = [
    "postgresql+psycopg://orch:S3c@r/3tPw@127.0.0.1/orch",  # unencoded @ and / in the password
    "postgresql+psycopg://orch:S3cr3tPw@127.0.0.1:notaport/orch",  # ValueError in make_url
    "postgresql+psycopg://orch:S3cr3tPw@[::1/orch",  # broken IPv6 literal
    "orch:S3cr3tPw@127.0.0.1/orch",  # no scheme
    "  postgresql://orch:S3cr3tPw@h/db",  # leading spaces
    "postgresql+psycopg:///orch?password=S3cr3tPw&host=127.0.0.1",  # libpq reads the password from the query
    "postgresql+psycopg://orch:S3cr3tPw@h:5432/orch#frag",
    "postgresql+psycopg://orch:S3c?r3tPw@h/orch",  # unencoded ? in the password
    "host=127.0.0.1 user=orch password=S3cr3tPw dbname=orch",  # a libpq DSN, not a URL
    "sqlite+pysqlcipher://:S3cr3tPw@/orch.db",
]


@pytest.mark.parametrize("url", UGLY)
def test_no_shape_lets_the_password_through(url: str) -> None:
    shown = redact_url(url)
    assert "S3c" not in shown and "3tPw" not in shown and "r3t" not in shown
    if "://" not in url or url.startswith(" "):
        assert shown == NOT_A_URL


@pytest.mark.parametrize("url", [u for u in UGLY if "password=S3cr3tPw dbname" not in u])
def test_scrub_removes_every_piece_a_driver_might_quote(url: str) -> None:
    from sqlalchemy.engine import make_url

    try:  # what a driver would echo: the "host" and "database" a parser made of the URL
        parsed = make_url(url.strip())
        quoted = f'connection to server at "{parsed.host}" failed for database "{parsed.database}": {url}'
    except Exception:
        quoted = f"could not connect: {url}"
    out = scrub(quoted, url)
    assert "S3cr3tPw" not in out and "3tPw" not in out and "S3c@r" not in out, out


def test_scrub_leaves_text_alone_when_the_url_has_no_secret() -> None:
    assert secrets_in("sqlite:///./orch.db") == []
    assert scrub('database "orch" does not exist', "postgresql://orch@h/orch") == 'database "orch" does not exist'
    assert scrub(f"password {SECRET} wrong", f"postgresql://u:{SECRET}@h/db") == "password *** wrong"
