"""Validation and normalisation of asset URIs, the identity of every asset."""

from __future__ import annotations

import re
import string
import unicodedata
import urllib.parse
from dataclasses import dataclass
from typing import NoReturn
from urllib.parse import SplitResult

from assetflow.core.errors import DefinitionError

__all__ = ["MAX_URI_LENGTH", "AssetUriError", "normalize_uri"]

#: Airflow's limit on an asset URI, applied to the normalised form.
MAX_URI_LENGTH = 1500


class AssetUriError(DefinitionError):
    """An asset URI is invalid; the message says what is wrong and how to fix it.

    It is a ``ValueError`` (through ``DefinitionError``), as Airflow raises for a bad URI.
    """


_UNRESERVED = string.ascii_letters + string.digits + "-._~"
_GEN_DELIMS = ":/?#[]@"
_SUB_DELIMS = "!$&'()*+,;="
_RFC3986_CHARS = frozenset(_UNRESERVED + _GEN_DELIMS + _SUB_DELIMS)
# '%' stays safe so that a suggestion keeps the user's own, already valid, percent-encodings.
_SAFE_WHEN_ENCODING = _UNRESERVED + _GEN_DELIMS + _SUB_DELIMS + "%"
_HEXDIGITS = frozenset(string.hexdigits)
# Characters people reach for when they try to name many assets at once.
_PATTERN_CHARS = frozenset("{}|^")

_RESERVED_SCHEMES = frozenset({"airflow", "assetflow"})
_SHOWN_LENGTH = 200


@dataclass(frozen=True)
class _Segment:
    """One required segment of a known scheme's path."""

    name: str
    default: str | None = None  # replaces an empty segment, as Airflow's postgres handler does
    pattern: re.Pattern[str] | None = None
    pattern_hint: str = ""


@dataclass(frozen=True)
class _SchemeRule:
    """What a URI of a known scheme must contain, and how it is completed."""

    example: str
    authority: str | None = None  # what the host part names ("bucket name", "host"); None: optional
    default_port: int | None = None
    needs_path: bool = False
    segments: tuple[_Segment, ...] | None = None  # the path must be exactly these segments
    canonical_scheme: str | None = None


_KAFKA_TOPIC = _Segment(
    "topic",
    pattern=re.compile(r"[A-Za-z0-9._-]{1,249}"),
    pattern_hint="Kafka topic names are 1 to 249 ASCII letters, digits, '.', '_' or '-'",
)
_POSTGRES = _SchemeRule(
    example="postgres://host:5432/database/schema/table",
    authority="host",
    default_port=5432,
    segments=(_Segment("database"), _Segment("schema", default="default"), _Segment("table")),
    canonical_scheme="postgres",
)

# The known schemes: the ones Airflow core and its s3, gcs, postgres, mysql and kafka providers
# give meaning to, plus s3a (Spark's name for S3). Every other scheme gets the generic
# normalisation only, and x- schemes not even that.
_SCHEME_RULES: dict[str, _SchemeRule] = {
    "s3": _SchemeRule(example="s3://my-bucket/path/to/key", authority="bucket name"),
    "s3a": _SchemeRule(example="s3a://my-bucket/path/to/key", authority="bucket name"),
    "gs": _SchemeRule(example="gs://my-bucket/path/to/object", authority="bucket name"),
    "gcs": _SchemeRule(example="gcs://my-bucket/path/to/object", authority="bucket name"),
    "file": _SchemeRule(example="file:///data/input.csv", needs_path=True),
    "postgres": _POSTGRES,
    "postgresql": _POSTGRES,
    "mysql": _SchemeRule(
        example="mysql://host:3306/database/table",
        authority="host",
        default_port=3306,
        segments=(_Segment("database"), _Segment("table")),
    ),
    "kafka": _SchemeRule(
        example="kafka://broker:9092/topic", authority="bootstrap server host", segments=(_KAFKA_TOPIC,)
    ),
}


def normalize_uri(uri: str) -> str:
    """Validate an asset URI and return its normalised form, the asset's identity.

    Every URI must be non-blank ASCII made of RFC 3986 characters (percent-encode anything
    else). Then, as in Airflow 3:

    - without a scheme it is a plain identifier and is returned unchanged;
    - an ``x-`` scheme is lower-cased and nothing else is checked or changed;
    - the ``airflow`` scheme, and our own ``assetflow``, are reserved;
    - otherwise the scheme is lower-cased, query parameters are sorted, the fragment and
      trailing slashes of the path are dropped (an empty path becomes ``/``), and the rest,
      host included, keeps its case.

    The normalised URI may be at most ``MAX_URI_LENGTH`` (1500, Airflow's limit) characters.

    Unlike Airflow, a URI with userinfo (``user@`` or ``user:password@``) is refused rather
    than silently stripped, and blank query values are kept rather than dropped.

    Known schemes are also checked and completed:

    ============================  =================================================
    scheme                        rule
    ============================  =================================================
    ``s3``, ``s3a``               needs a bucket name
    ``gs``, ``gcs``               needs a bucket name
    ``file``                      needs a path other than ``/``
    ``postgres``, ``postgresql``  needs a host; port 5432 by default; the path is
                                  exactly ``/database/schema/table`` (an empty
                                  schema becomes ``default``); ``postgresql``
                                  becomes ``postgres``
    ``mysql``                     needs a host; port 3306 by default; the path is
                                  exactly ``/database/table``
    ``kafka``                     needs a bootstrap server host; the path is
                                  exactly one valid topic name
    ============================  =================================================

    Normalisation is idempotent: ``normalize_uri(normalize_uri(u)) == normalize_uri(u)``.

    Args:
        uri: The asset URI as the user wrote it.

    Returns:
        The normalised URI.

    Raises:
        AssetUriError: The URI is invalid; the message names the problem and the fix.

    """
    if not isinstance(uri, str):
        raise AssetUriError(
            f"an asset URI must be a str, got {type(uri).__name__}; pass the URI as text, e.g. 's3://bucket/key'"
        )
    if not uri:
        raise AssetUriError(
            "an asset URI must not be empty; give it a URI such as 's3://bucket/key' or a name"
        )
    if "://" in uri and _without_userinfo(uri) != uri:
        _refuse_userinfo(uri)  # first: whatever else is wrong, credentials are the problem to report
    _check_ascii(uri)
    if uri.isspace():
        raise AssetUriError(
            "an asset URI must not be only whitespace; give it a URI such as 's3://bucket/key' or a name"
        )
    _check_characters(uri)

    try:
        parts = urllib.parse.urlsplit(uri)
    except ValueError as exc:
        raise _error(
            uri,
            f"its host cannot be parsed ({exc})",
            "put an IPv6 address in brackets, e.g. 'https://[::1]/x'",
        ) from exc

    scheme = parts.scheme  # urlsplit has already lower-cased it
    if not scheme:
        return uri
    # Before the x- shortcut: "no semantic checks" never means credentials may be stored in clear text.
    if "@" in parts.netloc:
        _refuse_userinfo(uri)
    if scheme.startswith("x-"):
        return _with_scheme(uri, scheme)
    if scheme in _RESERVED_SCHEMES:
        suggestion = _with_scheme(uri, "x-" + scheme)
        raise _error(
            uri,
            f"the scheme {scheme!r} is reserved",
            f"use a scheme of your own with the 'x-' prefix, e.g. {suggestion!r}",
        )
    host, port = _split_authority(uri, parts.netloc)

    parts = SplitResult(
        scheme=scheme,
        netloc=parts.netloc,
        path=parts.path.rstrip("/") or "/",
        query=_sorted_query(parts.query),
        fragment="",
    )
    rule = _SCHEME_RULES.get(scheme)
    if rule is not None:
        parts = _apply_rule(uri, rule, parts, host, port)

    normalized = _unsplit(parts)
    if len(normalized) > MAX_URI_LENGTH:
        raise _error(
            uri,
            f"it is {len(normalized)} characters long once normalised, over the limit of {MAX_URI_LENGTH}",
            "shorten it, e.g. name the dataset's prefix rather than every object in it",
        )
    return normalized


def _refuse_userinfo(uri: str) -> NoReturn:
    raise _error(
        uri,
        "it contains userinfo (a user name or password before '@'); credentials must never be part "
        "of an asset URI, which is stored and shown in clear text",
        f"remove the userinfo, e.g. {_without_userinfo(uri)!r}, and keep credentials in a secret store",
    )


def _check_ascii(uri: str) -> None:
    if uri.isascii():
        return
    position, char = next((i, c) for i, c in enumerate(uri) if not c.isascii())
    encoded = _percent_encode(char)
    whole = _percent_encode(_without_userinfo(uri, "***@"))  # the fix must not echo a password either
    if encoded is None or whole is None:
        fix = "remove it; it cannot be encoded as UTF-8"
    else:
        fix = f"percent-encode its UTF-8 bytes: {char!r} is {encoded!r}, which gives {whole!r}"
    raise _error(uri, f"it contains the non-ASCII character {_describe(char)} at position {position}", fix)


def _check_characters(uri: str) -> None:
    for position, char in enumerate(uri):
        if char == "%":
            if len(digits := uri[position + 1 : position + 3]) == 2 and set(digits) <= _HEXDIGITS:
                continue
            raise _error(
                uri,
                f"the '%' at position {position} does not start a percent-encoding (% and two hex digits)",
                "write a literal '%' as '%25'",
            )
        if char in _RFC3986_CHARS:
            continue
        problem = f"it contains {_describe(char)} at position {position}, which RFC 3986 does not allow"
        encoded = _percent_encode(char) or "%XX"
        if char.isspace() and (position == 0 or position == len(uri) - 1):
            fix = "remove the surrounding whitespace"
        elif char == "\\":
            fix = f"separate path segments with '/' (this is not a Windows path), or write it as {encoded!r}"
        elif char in _PATTERN_CHARS:
            fix = (
                "glob and regex patterns are not supported: one URI names exactly one asset (declare each "
                f"asset, or use an AssetAlias); if the character is part of the name, write it as {encoded!r}"
            )
        else:
            fix = f"percent-encode it as {encoded!r}"
        raise _error(uri, problem, fix)


def _split_authority(uri: str, netloc: str) -> tuple[str, str | None]:
    """Split ``host[:port]`` without lower-casing the host (``SplitResult.hostname`` would)."""
    if netloc.startswith("["):
        host, _, rest = netloc.partition("]")
        host += "]"
        if rest and not rest.startswith(":"):
            raise _error(uri, f"unexpected {rest!r} after the IPv6 host", "write it as '[address]:port'")
        port = rest[1:] if rest else None
    else:
        host, colon, port_text = netloc.rpartition(":")
        if not colon:
            host, port = netloc, None
        else:
            port = port_text
    if port and not (port.isdigit() and int(port) <= 65535):
        raise _error(
            uri,
            f"its port {port!r} is not a number from 0 to 65535",
            "write the port in decimal, e.g. 'host:5432'",
        )
    return host, port


def _sorted_query(query: str) -> str:
    # surrogateescape round-trips percent-encoded bytes that are not UTF-8, so two different
    # byte strings never collapse into one U+FFFD and hence into one asset.
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, errors="surrogateescape")
    return urllib.parse.urlencode(sorted(pairs), errors="surrogateescape")


def _apply_rule(uri: str, rule: _SchemeRule, parts: SplitResult, host: str, port: str | None) -> SplitResult:
    scheme = parts.scheme
    if rule.authority is not None and not host:
        raise _error(
            uri, f"{scheme}:// URIs must contain a {rule.authority}", f"write it as {rule.example!r}"
        )
    netloc = parts.netloc
    if rule.default_port is not None and not port:
        netloc = f"{host}:{rule.default_port}"
    path = parts.path
    if rule.needs_path and path == "/":
        raise _error(uri, f"{scheme}:// URIs must contain a path", f"write it as {rule.example!r}")
    if rule.segments is not None:
        path = _check_segments(uri, scheme, rule.segments, rule.example, path)
    return parts._replace(scheme=rule.canonical_scheme or scheme, netloc=netloc, path=path)


def _check_segments(uri: str, scheme: str, segments: tuple[_Segment, ...], example: str, path: str) -> str:
    names = [segment.name for segment in segments]
    wanted = "/" + "/".join(names)
    values = path.split("/")[1:]
    if values == [""]:
        values = []
    if len(values) != len(segments):
        raise _error(
            uri,
            f"the path of {scheme}:// URIs must be exactly {wanted}, got {len(values)} segment(s)",
            f"write it as {example!r}",
        )
    for index, (segment, value) in enumerate(zip(segments, values, strict=True)):
        if not value and segment.default is not None:
            values[index] = segment.default
        elif not value:
            raise _error(uri, f"the {segment.name} name in {wanted} is empty", f"write it as {example!r}")
        elif segment.pattern is not None and not segment.pattern.fullmatch(value):
            raise _error(uri, f"{value!r} is not a valid {segment.name} name", segment.pattern_hint)
    return "/" + "/".join(values)


def _unsplit(parts: SplitResult) -> str:
    if not parts.netloc and parts.path.startswith("//"):
        # urlunsplit would write "scheme://x" and the path's first segment would become a host
        # when read again; an explicit empty authority keeps the result stable.
        query = f"?{parts.query}" if parts.query else ""
        return f"{parts.scheme}://{parts.path}{query}"
    return urllib.parse.urlunsplit(parts)


def _with_scheme(uri: str, scheme: str) -> str:
    """Return ``uri`` with its scheme (and nothing else) replaced."""
    return scheme + uri[uri.index(":") :]


def _percent_encode(text: str) -> str | None:
    try:
        return urllib.parse.quote(text, safe=_SAFE_WHEN_ENCODING)
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 form
        return None


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"{char!r} (U+{ord(char):04X}{' ' + name if name else ''})"


def _without_userinfo(uri: str, replacement: str = "") -> str:
    """Return ``uri`` with the ``userinfo@`` of its authority replaced."""
    start = uri.find("//")
    if start < 0:
        return uri
    start += 2
    end = min((i for i in (uri.find(c, start) for c in "/?#") if i >= 0), default=len(uri))
    at = uri.rfind("@", start, end)
    if at < 0:
        return uri
    return uri[:start] + replacement + uri[at + 1 :]


def _error(uri: str, problem: str, fix: str) -> AssetUriError:
    # Never echo a password: the message ends up in logs and API responses.
    shown = _without_userinfo(uri, "***@")
    if len(shown) > _SHOWN_LENGTH:
        shown = shown[:_SHOWN_LENGTH] + "..."
    return AssetUriError(f"invalid asset URI {shown!r}: {problem}; {fix}")
