"""Validation and normalisation of asset URIs, the identity of every asset, as Apache Airflow 3 does them.

As in Airflow 3.3 (its task SDK and the amazon, google, postgres, mysql and kafka providers):

- without a scheme it is a plain identifier and is returned unchanged;
- an ``x-`` scheme skips every check and change: the URI is returned as written;
- the ``airflow`` scheme is reserved;
- otherwise the scheme is lower-cased, query parameters are sorted and those with a blank value
  dropped, the fragment and the path's trailing slashes are dropped (an empty path becomes ``/``),
  and the rest, host included, keeps its case. Leading spaces and control characters, and every
  tab and line break, are removed as Python's URL parser does;
- the result may be at most ``MAX_URI_LENGTH`` (1500) characters, plain names and ``x-`` URIs too.

We differ from Airflow deliberately, and always by refusing a URI that it accepts:

- a URI carrying a password (``user:secret@``) is refused, without echoing the password: Airflow drops
  the userinfo with a warning (or keeps it, in ``x-`` and scheme-less URIs), so a secret is either
  stored in an identity shown in clear text or silently cut from it. A user name alone is accepted;
- non-ASCII is refused, as Airflow's documentation says (its SDK refuses it only with a MySQL
  metadata database); percent-encode it;
- our own ``assetflow`` scheme is reserved too;
- anything but a ``str`` is refused (Airflow passes it through ``str()``);
- percent-encoded query bytes that are not UTF-8 are refused: Airflow turns them into U+FFFD, so
  ``?a=%FF`` and ``?a=%FE`` would be one asset;
- a path starting with ``//`` after an empty authority is refused: Airflow writes ``foo:////x`` as
  ``foo://x``, whose first path segment reads back as a host.

Known schemes are checked and completed as Airflow's providers do:

============================  =================================================
scheme                        rule
============================  =================================================
``s3``, ``gs``                needs a bucket name
``postgres``, ``postgresql``  needs a host; port 5432 by default; the path is
                              ``/database/schema/table`` (an empty schema
                              becomes ``default``); written as ``postgres``
``mysql``, ``mariadb``        needs a host; port 3306 by default; the path is
                              ``/database/table``; written as ``mysql``
``redshift``                  needs a host; port 5439 by default; the path is
                              ``/database/schema/table``
``bigquery``                  needs a project ID; the path is ``/dataset/table``
``kafka``                     needs a bootstrap server host and a topic
============================  =================================================

A port that is not a number from 0 to 65535 is refused on the schemes with a default port only.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from dataclasses import dataclass
from urllib.parse import SplitResult

from assetflow.core.errors import DefinitionError

__all__ = ["MAX_URI_LENGTH", "AssetUriError", "normalize_uri"]

#: Airflow's limit on an asset URI, applied to the normalised form.
MAX_URI_LENGTH = 1500


class AssetUriError(DefinitionError):
    """An asset URI is invalid; the message says what is wrong and how to fix it.

    It is a ``ValueError`` (through ``DefinitionError``), as Airflow raises for a bad URI. The message
    never contains a password, even when the URI held one: it ends up in logs and API responses.
    """


# Ours as 'airflow' is Airflow's: a name of the system itself, never of a user's data.
_RESERVED_SCHEMES = frozenset({"airflow", "assetflow"})
_SHOWN_LENGTH = 200
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
# What Python's URL parser strips from the start, and removes everywhere, before it splits a URI.
_LEADING_STRIPPED = "".join(map(chr, range(0x21)))
_REMOVED = str.maketrans("", "", "\t\r\n")
# '%' stays safe so that a suggestion keeps the user's own percent-encodings.
_SAFE_WHEN_ENCODING = "-._~:/?#[]@!$&'()*+,;=%"


@dataclass(frozen=True)
class _SchemeRule:
    """What Airflow's normaliser for one scheme checks and completes.

    Attributes:
        example: A valid URI of the scheme, shown in error messages.
        authority: What the part after ``//`` names ("bucket name", "host"); it must not be empty.
        default_port: Written after the host when the URI gives no port (a non-numeric port is refused).
        segments: The path must be exactly these segments; an empty one passes, as in Airflow.
        needs_path: The path must not be empty (``/``).
        blank_schema: Replaces an empty second segment (Airflow's postgres normaliser does this).
        canonical_scheme: The scheme written in the normalised URI.
    """

    example: str
    authority: str
    default_port: int | None = None
    segments: tuple[str, ...] = ()
    needs_path: bool = False
    blank_schema: str | None = None
    canonical_scheme: str | None = None


_POSTGRES = _SchemeRule(
    example="postgres://host:5432/database/schema/table",
    authority="host",
    default_port=5432,
    segments=("database", "schema", "table"),
    blank_schema="default",
    canonical_scheme="postgres",
)
_MYSQL = _SchemeRule(
    example="mysql://host:3306/database/table",
    authority="host",
    default_port=3306,
    segments=("database", "table"),
    canonical_scheme="mysql",
)

# The normalisers that Airflow's amazon, google, postgres, mysql and apache-kafka providers register.
# Every other scheme gets the generic normalisation only: file and gcp have no-op normalisers, and
# s3a, gcs, trino, hive and the rest have none.
_SCHEME_RULES: dict[str, _SchemeRule] = {
    "s3": _SchemeRule(example="s3://my-bucket/path/to/key", authority="bucket name"),
    "gs": _SchemeRule(example="gs://my-bucket/path/to/object", authority="bucket name"),
    "postgres": _POSTGRES,
    "postgresql": _POSTGRES,
    "mysql": _MYSQL,
    "mariadb": _MYSQL,
    "redshift": _SchemeRule(
        example="redshift://cluster:5439/database/schema/table",
        authority="host",
        default_port=5439,
        segments=("database", "schema", "table"),
    ),
    "bigquery": _SchemeRule(
        example="bigquery://project/dataset/table", authority="project ID", segments=("dataset", "table")
    ),
    "kafka": _SchemeRule(
        example="kafka://broker:9092/topic", authority="bootstrap server host", needs_path=True
    ),
}


def normalize_uri(uri: str) -> str:
    """Validate an asset URI and return its normalised form, the asset's identity, as Airflow 3 does.

    The module's docstring gives the rules, and the places where we deliberately differ from Airflow.
    Normalisation is idempotent: ``normalize_uri(normalize_uri(u)) == normalize_uri(u)``.

    Args:
        uri: The asset URI as the user wrote it.

    Returns:
        The normalised URI.

    Raises:
        AssetUriError: The URI is invalid; the message names the problem and the fix.

    """
    _check_text(uri)
    _refuse_password(uri)
    _check_ascii(uri)
    normalized = _sanitize(uri)
    if len(normalized) > MAX_URI_LENGTH:
        raise _error(
            uri,
            f"it is {len(normalized)} characters long once normalised, over the limit of {MAX_URI_LENGTH}",
            "shorten it, e.g. name the dataset's prefix rather than every object in it",
        )
    return normalized


def _check_text(uri: object) -> None:
    if not isinstance(uri, str):
        raise AssetUriError(
            f"an asset URI must be a str, got {type(uri).__name__}; pass the URI as text, e.g. 's3://bucket/key'"
        )
    if not uri:
        raise AssetUriError(
            "an asset URI must not be empty; give it a URI such as 's3://bucket/key' or a name"
        )
    if uri.isspace():
        raise AssetUriError(
            "an asset URI must not be only whitespace; give it a URI such as 's3://bucket/key' or a name"
        )


def _refuse_password(uri: str) -> None:
    # Non-ASCII never delimits anything; standing in for it lets the parser find a password made of it.
    try:
        password = urllib.parse.urlsplit(_NON_ASCII.sub("_", uri)).password
    except ValueError:
        return  # refused for its host later on, and error messages hide any userinfo
    if password:
        raise _error(
            uri,
            "it contains a password in its userinfo; credentials must never be part of an asset URI, "
            "which is stored and shown in clear text (Airflow would drop the userinfo with a warning)",
            f"remove the userinfo, e.g. {_without_userinfo(uri)!r}, and keep credentials in a secret store",
        )


def _check_ascii(uri: str) -> None:
    if uri.isascii():
        return
    position, char = next((i, c) for i, c in enumerate(uri) if not c.isascii())
    encoded = _percent_encode(char)
    whole = _percent_encode(_without_userinfo(uri, "***@"))
    if encoded is None or whole is None:
        fix = "remove it; it cannot be encoded as UTF-8"
    else:
        fix = f"percent-encode its UTF-8 bytes: {char!r} is {encoded!r}, which gives {whole!r}"
    raise _error(uri, f"it contains the non-ASCII character {_describe(char)} at position {position}", fix)


def _sanitize(uri: str) -> str:
    """Airflow's normalisation of an ASCII URI without a password."""
    parts = _split(uri)
    scheme = parts.scheme  # the parser has lower-cased it
    if not scheme or scheme.startswith("x-"):
        return uri
    if scheme in _RESERVED_SCHEMES:
        suggestion = f"x-{scheme}{uri[uri.index(':') :]}"
        raise _error(
            uri,
            f"the scheme {scheme!r} is reserved",
            f"use a scheme of your own with the 'x-' prefix, e.g. {suggestion!r}",
        )
    parts = parts._replace(
        path=parts.path.rstrip("/") or "/",
        query=_sorted_query(uri, parts.query),
        fragment="",
    )
    rule = _SCHEME_RULES.get(scheme)
    if rule is not None:
        parts = _apply_rule(uri, rule, parts)
    if not parts.netloc and parts.path.startswith("//"):
        raise _error(
            uri,
            "its path starts with '//' after an empty authority, so written back its first segment "
            "would read as a host (Airflow writes 'foo:////x' as 'foo://x')",
            f"name the host, or write the path with one leading '/', e.g. '{scheme}:/{parts.path.lstrip('/')}'",
        )
    return urllib.parse.urlunsplit(parts)


def _split(uri: str) -> SplitResult:
    try:
        return urllib.parse.urlsplit(uri)
    except ValueError as exc:
        raise _error(
            uri,
            f"its host cannot be parsed ({exc})",
            "put an IPv6 address in brackets, e.g. 'https://[::1]/x', and no other '[' or ']' in the host",
        ) from exc


def _sorted_query(uri: str, query: str) -> str:
    try:
        pairs = urllib.parse.parse_qsl(query, errors="strict")
    except UnicodeDecodeError as exc:
        raise _error(
            uri,
            "its query has percent-encoded bytes that are not UTF-8; Airflow would turn them into "
            "U+FFFD, making different URIs one asset",
            "percent-encode the UTF-8 bytes of the text you mean, e.g. 'caf%C3%A9'",
        ) from exc
    return urllib.parse.urlencode(sorted(pairs))


def _apply_rule(uri: str, rule: _SchemeRule, parts: SplitResult) -> SplitResult:
    scheme = parts.scheme
    if not parts.netloc:
        raise _error(
            uri, f"{scheme}:// URIs must contain a {rule.authority}", f"write it as {rule.example!r}"
        )
    if rule.default_port is not None and _port(uri, parts) is None:
        parts = parts._replace(netloc=f"{parts.netloc.rstrip(':')}:{rule.default_port}")
    if rule.needs_path and parts.path == "/":
        raise _error(uri, f"{scheme}:// URIs must contain a topic name", f"write it as {rule.example!r}")
    if rule.segments:
        parts = parts._replace(path=_check_segments(uri, rule, scheme, parts.path))
    return parts._replace(scheme=rule.canonical_scheme or scheme)


def _port(uri: str, parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError as exc:
        raise _error(
            uri,
            f"its port is not a number from 0 to 65535 ({exc})",
            "write one port, in decimal, after the host, e.g. 'host:5432', or none for the default",
        ) from exc


def _check_segments(uri: str, rule: _SchemeRule, scheme: str, path: str) -> str:
    values = path.split("/")[1:]
    if len(values) != len(rule.segments):
        wanted = "/" + "/".join(rule.segments)
        got = 0 if values == [""] else len(values)
        raise _error(
            uri,
            f"the path of {scheme}:// URIs must be exactly {wanted}, got {got} segment(s)",
            f"write it as {rule.example!r}",
        )
    if rule.blank_schema is not None and not values[1]:
        values[1] = rule.blank_schema
    return "/" + "/".join(values)


def _percent_encode(text: str) -> str | None:
    try:
        return urllib.parse.quote(text, safe=_SAFE_WHEN_ENCODING)
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
        return None


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"{char!r} (U+{ord(char):04X}{' ' + name if name else ''})"


def _without_userinfo(uri: str, replacement: str = "") -> str:
    """Return ``uri`` with the ``userinfo@`` of its authority replaced, found as the URL parser finds it."""
    cleaned = uri.lstrip(_LEADING_STRIPPED).translate(_REMOVED)
    start = cleaned.find("//")
    if start < 0:
        return uri
    start += 2
    end = min((i for i in (cleaned.find(c, start) for c in "/?#") if i >= 0), default=len(cleaned))
    at = cleaned.rfind("@", start, end)
    if at < 0:
        return uri
    return cleaned[:start] + replacement + cleaned[at + 1 :]


def _error(uri: str, problem: str, fix: str) -> AssetUriError:
    # Never echo a password: the message ends up in logs and API responses.
    shown = _without_userinfo(uri, "***@")
    if len(shown) > _SHOWN_LENGTH:
        shown = shown[:_SHOWN_LENGTH] + "..."
    return AssetUriError(f"invalid asset URI {shown!r}: {problem}; {fix}")
