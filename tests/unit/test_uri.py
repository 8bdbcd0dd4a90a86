"""Asset URI validation and normalisation (DESIGN §3.1)."""

from __future__ import annotations

import string
import urllib.parse

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from assetflow.core.errors import DefinitionError
from assetflow.core.uri import MAX_URI_LENGTH, AssetUriError, normalize_uri

RFC3986_CHARS = string.ascii_letters + string.digits + "-._~" + ":/?#[]@" + "!$&'()*+,;="


def error_for(uri: object) -> str:
    with pytest.raises(AssetUriError) as info:
        normalize_uri(uri)  # type: ignore[arg-type]
    return str(info.value)


# --- the examples in the reference docs ("What is valid URI?") -------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "s3://asset-bucket/example.csv",
        "s3://asset/example.csv",
        "x-my-thing://foobarbaz",
        "//example/asset",
        "example_asset",
    ],
)
def test_reference_valid_examples_are_kept_as_written(uri: str) -> None:
    assert normalize_uri(uri) == uri


@pytest.mark.parametrize(
    ("uri", "hint"),
    [
        ("s3://", "must contain a bucket name"),
        ("airflow://example_asset", "reserved"),
        ("èxample_datašet", "non-ASCII"),
    ],
)
def test_reference_invalid_examples_are_rejected(uri: str, hint: str) -> None:
    assert hint in error_for(uri)


def test_uris_are_case_sensitive_including_the_host() -> None:
    assert normalize_uri("s3://example/asset") != normalize_uri("s3://Example/asset")
    assert normalize_uri("s3://Example/Asset") == "s3://Example/Asset"
    assert normalize_uri("https://Example.COM/Path") == "https://Example.COM/Path"


# --- input type, emptiness -----------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 42, b"s3://bucket/key", ["s3://bucket/key"]])
def test_a_non_str_is_rejected(value: object) -> None:
    assert "must be a str" in error_for(value)


def test_an_empty_uri_is_rejected() -> None:
    assert "must not be empty" in error_for("")


@pytest.mark.parametrize("uri", [" ", "   ", "\t", "\n \r"])
def test_a_whitespace_only_uri_is_rejected(uri: str) -> None:
    assert "only whitespace" in error_for(uri)


def test_errors_are_value_errors_and_definition_errors() -> None:
    with pytest.raises(ValueError, match="reserved"):
        normalize_uri("airflow://x")
    assert issubclass(AssetUriError, DefinitionError)


# --- characters ------------------------------------------------------------------------------


def test_non_ascii_is_rejected_with_the_percent_encoded_suggestion() -> None:
    message = error_for("èxample_datašet")
    assert "'è'" in message
    assert "position 0" in message
    assert "'%C3%A8'" in message
    assert "'%C3%A8xample_data%C5%A1et'" in message


def test_the_suggested_encoding_of_a_non_ascii_uri_is_valid() -> None:
    assert normalize_uri("s3://bucket/%C3%A8xample") == "s3://bucket/%C3%A8xample"


def test_a_lone_surrogate_is_rejected_without_a_suggestion() -> None:
    assert "cannot be encoded as UTF-8" in error_for("s3://bucket/\ud800")


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bucket/a b",
        's3://bucket/"a"',
        "s3://bucket/<a>",
        "s3://bucket/a`b",
        "s3://bucket/a\x00",
        "name with space",
        " name",
        "s3://bucket/{a,b}.csv",
        "s3://bucket/a|b",
        "s3://bucket/^data",
        "file:///C:\\data\\x.csv",
        "s3://bucket/100%",
        "s3://bucket/%zz",
        "a%g1",
    ],
)
def test_ascii_outside_rfc_3986_is_kept_as_written_as_airflow_does(uri: str) -> None:
    assert normalize_uri(uri) == uri


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        (" s3://bucket/key", "s3://bucket/key"),
        ("\x01s3://bucket/key", "s3://bucket/key"),
        ("s3://bucket/key\n", "s3://bucket/key"),
        ("s3://bucket/a\tb", "s3://bucket/ab"),
        ("s3://bucket/key ", "s3://bucket/key "),
    ],
)
def test_leading_controls_and_every_tab_or_line_break_are_removed_as_python_and_airflow_do(
    uri: str, expected: str
) -> None:
    assert normalize_uri(uri) == expected


def test_percent_encodings_are_kept_as_written() -> None:
    assert normalize_uri("s3://bucket/a%20b%2Fc%c3%a8") == "s3://bucket/a%20b%2Fc%c3%a8"


def test_every_rfc_3986_character_is_accepted() -> None:
    assert normalize_uri(RFC3986_CHARS) == RFC3986_CHARS
    path_chars = "".join(c for c in RFC3986_CHARS if c not in "?#")
    assert normalize_uri(f"s3://bucket/{path_chars}") == f"s3://bucket/{path_chars}"


# --- scheme-less identifiers and x- schemes --------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    ["example_asset", "//example/asset", "//Example/Asset/?b=1&a=2#frag", "relative/path/", "//user@host/x"],
)
def test_a_uri_without_scheme_is_a_plain_identifier_kept_unchanged(uri: str) -> None:
    assert normalize_uri(uri) == uri


@pytest.mark.parametrize(
    "uri",
    [
        "x-my-thing://foobarbaz",
        "X-My-Thing://Foo/Bar/?b=2&a=1#frag",
        "x-thing://",
        "x-airflow://example_asset",
        "x-team:orders@example.com",
        "x-db://admin@db/orders",
        "x-my-thing://a b",
    ],
)
def test_an_x_uri_is_kept_exactly_as_written(uri: str) -> None:
    assert normalize_uri(uri) == uri


# --- schemes --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("S3://Bucket/Key", "s3://Bucket/Key"),
        ("HTTPS://Example.com/A", "https://Example.com/A"),
        ("Snowflake://Account/DB", "snowflake://Account/DB"),
    ],
)
def test_the_scheme_is_lower_cased(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    "uri", ["airflow://example_asset", "AIRFLOW://x", "Airflow:x", "assetflow://x", "AssetFlow://x/y"]
)
def test_reserved_schemes_are_rejected_case_insensitively_with_an_x_suggestion(uri: str) -> None:
    message = error_for(uri)
    assert "is reserved" in message
    assert "'x-" in message


def test_the_reserved_scheme_suggestion_is_itself_valid() -> None:
    assert "'x-airflow://example_asset'" in error_for("airflow://example_asset")
    assert normalize_uri("x-airflow://example_asset") == "x-airflow://example_asset"


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("https://Example.com/path/", "https://Example.com/path"),
        (
            "snowflake://Account/DB/Schema/Table?warehouse=W&role=R",
            "snowflake://Account/DB/Schema/Table?role=R&warehouse=W",
        ),
        ("foo:bar", "foo:bar"),
    ],
)
def test_unknown_schemes_get_the_generic_normalisation_only(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


# --- userinfo --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "suggestion"),
    [
        ("s3://user:s3cr3t@bucket/key", "s3://bucket/key"),
        ("s3://:s3cr3t@bucket/key", "s3://bucket/key"),
        ("https://u:s3cr3t@Example.com:8443/x?a=1", "https://Example.com:8443/x?a=1"),
        ("postgres://admin:s3cr3t@db/app/public/orders", "postgres://db/app/public/orders"),
        ("x-db://admin:s3cr3t@db/orders", "x-db://db/orders"),
        ("//admin:s3cr3t@db/orders", "//db/orders"),
        ("s3:/\t/user:s3cr3t@bucket/key", "s3://bucket/key"),
    ],
)
def test_a_password_is_refused_with_the_uri_to_use_instead(uri: str, suggestion: str) -> None:
    # Airflow drops the userinfo with a warning (and keeps it in x- and scheme-less URIs): we refuse.
    message = error_for(uri)
    assert "credentials must never" in message
    assert repr(suggestion) in message
    assert "s3cr3t" not in message


@pytest.mark.parametrize(
    "uri",
    [
        "s3://user@bucket/key",
        "s3://user:@bucket/key",
        "s3://@bucket/key",
        "https://user@Example.com/x",
        "abfs://container@account.dfs.core.windows.net/path",
    ],
)
def test_userinfo_without_a_password_is_kept_as_airflow_keeps_it(uri: str) -> None:
    assert normalize_uri(uri) == uri


def test_a_password_is_never_echoed_in_an_error_message() -> None:
    assert "s3cr3t" not in error_for("s3://user:s3cr3t@bucket/key")
    assert "s3cr3t" not in error_for("s3://user:s3cr3t@bucket/a\u00e8")
    assert "s3cr3t" not in error_for("airflow://user:s3cr3t@host/x")
    assert "s3cr3t" not in error_for("s3://user:s3cr3t@[zz]/key")


def test_an_at_sign_outside_the_authority_is_allowed() -> None:
    assert normalize_uri("s3://bucket/team@example.com/file") == "s3://bucket/team@example.com/file"
    assert normalize_uri("https://host/x?owner=a@b") == "https://host/x?owner=a%40b"


# --- query, fragment, path -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/key?b=2&a=1&a=0", "s3://bucket/key?a=0&a=1&b=2"),
        ("s3://bucket/key?flag&a=1", "s3://bucket/key?a=1"),
        ("s3://bucket/key?a=&b=", "s3://bucket/key"),
        ("s3://bucket/key?", "s3://bucket/key"),
        ("s3://bucket/key?a=x+y", "s3://bucket/key?a=x+y"),
        ("s3://bucket/key?a=x%20y", "s3://bucket/key?a=x+y"),
        ("s3://bucket/key?a=%2F", "s3://bucket/key?a=%2F"),
        ("s3://bucket/key?a=%c3%a8", "s3://bucket/key?a=%C3%A8"),
    ],
)
def test_query_parameters_are_sorted_re_encoded_and_blank_ones_dropped(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize("uri", ["https://host/?a=%FF&b=%FE", "s3://bucket/key?a=%C3"])
def test_query_bytes_that_are_not_utf8_are_refused(uri: str) -> None:
    # Airflow decodes them to U+FFFD, so different URIs would become one asset.
    assert "not UTF-8" in error_for(uri)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/key#part", "s3://bucket/key"),
        ("s3://bucket/#x", "s3://bucket/"),
        ("s3://bucket/key?b=1&a=2#frag", "s3://bucket/key?a=2&b=1"),
    ],
)
def test_the_fragment_is_dropped(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket/dir/", "s3://bucket/dir"),
        ("s3://bucket/dir///", "s3://bucket/dir"),
        ("s3://bucket", "s3://bucket/"),
        ("s3://bucket/", "s3://bucket/"),
        ("s3://bucket//", "s3://bucket/"),
        ("https://host", "https://host/"),
        ("s3://bucket/a//b", "s3://bucket/a//b"),
    ],
)
def test_trailing_slashes_are_stripped_and_an_empty_path_is_a_slash(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize("uri", ["foo:////x", "file:////server/share"])
def test_a_path_starting_with_two_slashes_after_an_empty_authority_is_refused(uri: str) -> None:
    # Airflow writes 'foo:////x' as 'foo://x': its first path segment would read back as a host.
    assert "read as a host" in error_for(uri)


# --- ports and hosts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("https://host:8443/x", "https://host:8443/x"),
        ("https://[::1]:8080/", "https://[::1]:8080/"),
        ("s3://[::1]/key", "s3://[::1]/key"),
        ("https://[FE80::1]/x", "https://[FE80::1]/x"),
        # Only the normalisers that add a default port read it, so elsewhere Airflow keeps any text.
        ("https://host:abc/x", "https://host:abc/x"),
        ("https://host:70000/", "https://host:70000/"),
        ("https://a:b:c/", "https://a:b:c/"),
        ("s3://[::1]x:80/", "s3://[::1]x:80/"),
        ("kafka://broker:abc/orders", "kafka://broker:abc/orders"),
    ],
)
def test_ports_and_ipv6_hosts_are_kept(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    "uri",
    [
        "postgres://db:abc/app/public/orders",
        "postgres://db:1:2/app/public/orders",
        "postgres://db:70000/app/public/orders",
        "mysql://db:3306:3307/app/orders",
        "redshift://cluster:abc/dev/public/sales",
    ],
)
def test_an_invalid_port_is_rejected_where_a_default_port_applies(uri: str) -> None:
    assert "port is not a number from 0 to 65535" in error_for(uri)


@pytest.mark.parametrize("uri", ["https://[::1/x", "https://[zz]/x", "https://a[b]/x"])
def test_an_unparseable_host_is_rejected(uri: str) -> None:
    assert "IPv6" in error_for(uri)


# --- known schemes ---------------------------------------------------------------------------


@pytest.mark.parametrize("uri", ["s3://", "s3:///key", "s3:bucket/key", "S3://"])
def test_s3_needs_a_bucket(uri: str) -> None:
    message = error_for(uri)
    assert "must contain a bucket name" in message
    assert "s3" in message


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        # Airflow registers no normaliser for s3a or gcs, and checks only that s3's authority is not empty.
        ("s3a://bucket/key/", "s3a://bucket/key"),
        ("s3a://", "s3a:/"),
        ("gcs://", "gcs:/"),
        ("gcs://b/o/", "gcs://b/o"),
        ("s3://:80/key", "s3://:80/key"),
    ],
)
def test_schemes_without_a_normaliser_get_the_generic_normalisation(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize("uri", ["gs://", "gs:///object"])
def test_gs_needs_a_bucket(uri: str) -> None:
    assert "must contain a bucket name" in error_for(uri)


@pytest.mark.parametrize(("uri", "expected"), [("gs://b/o", "gs://b/o"), ("gs://b/o/", "gs://b/o")])
def test_gs_uris_with_a_bucket_pass(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file://", "file:///"),
        ("file:///", "file:///"),
        ("file:", "file:///"),
        ("file://host", "file://host/"),
    ],
)
def test_file_uris_need_no_path(uri: str, expected: str) -> None:
    # Airflow's SDK gives file a no-op normaliser, ahead of the common-io provider's path check.
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///data/input.csv", "file:///data/input.csv"),
        ("file:/data/input.csv", "file:///data/input.csv"),
        ("file://localhost/data/", "file://localhost/data"),
    ],
)
def test_file_uris_with_a_path_pass(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("postgres://db/app/public/orders", "postgres://db:5432/app/public/orders"),
        ("postgres://db:6543/app/public/orders", "postgres://db:6543/app/public/orders"),
        ("postgres://db:/app/public/orders", "postgres://db:5432/app/public/orders"),
        ("postgresql://db/app/public/orders", "postgres://db:5432/app/public/orders"),
        ("POSTGRESQL://DB/App/Public/Orders", "postgres://DB:5432/App/Public/Orders"),
        ("postgres://db/app//orders", "postgres://db:5432/app/default/orders"),
        ("postgres://[::1]/app/public/orders", "postgres://[::1]:5432/app/public/orders"),
        ("postgres://db/app/public/orders/?sslmode=x", "postgres://db:5432/app/public/orders?sslmode=x"),
        ("postgres://db//public/orders", "postgres://db:5432//public/orders"),
        ("postgres://:5432/app/public/orders", "postgres://:5432/app/public/orders"),
        ("postgres://admin@db/app/public/orders", "postgres://admin@db:5432/app/public/orders"),
    ],
)
def test_postgres_gets_its_default_port_and_schema(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "hint"),
    [
        ("postgres:///app/public/orders", "must contain a host"),
        ("postgres://db/app/orders", "exactly /database/schema/table, got 2"),
        ("postgres://db/a/b/c/d", "exactly /database/schema/table, got 4"),
        ("postgres://db", "exactly /database/schema/table, got 0"),
    ],
)
def test_invalid_postgres_uris_are_rejected(uri: str, hint: str) -> None:
    message = error_for(uri)
    assert hint in message
    assert "postgres://host:5432/database/schema/table" in message


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("mysql://db/app/orders", "mysql://db:3306/app/orders"),
        ("mysql://db:3307/app/orders/", "mysql://db:3307/app/orders"),
        ("mysql://db//orders", "mysql://db:3306//orders"),
        ("mariadb://db/app/orders", "mysql://db:3306/app/orders"),
        ("MariaDB://DB:3307/App/Orders", "mysql://DB:3307/App/Orders"),
    ],
)
def test_mysql_and_mariadb_get_the_default_port_and_the_mysql_scheme(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "hint"),
    [
        ("mysql:///app/orders", "must contain a host"),
        ("mysql://db/app/public/orders", "exactly /database/table, got 3"),
        ("mysql://db/app", "exactly /database/table, got 1"),
        ("mariadb://db/app", "exactly /database/table, got 1"),
    ],
)
def test_invalid_mysql_uris_are_rejected(uri: str, hint: str) -> None:
    assert hint in error_for(uri)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("redshift://cluster/dev/public/sales", "redshift://cluster:5439/dev/public/sales"),
        ("redshift://cluster:/dev/public/sales/", "redshift://cluster:5439/dev/public/sales"),
        ("redshift://cluster:5440/dev//sales", "redshift://cluster:5440/dev//sales"),
    ],
)
def test_redshift_gets_its_default_port(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "hint"),
    [
        ("redshift:///dev/public/sales", "must contain a host"),
        ("redshift://cluster/dev/sales", "exactly /database/schema/table, got 2"),
        ("redshift://cluster/a/b/c/d", "exactly /database/schema/table, got 4"),
    ],
)
def test_invalid_redshift_uris_are_rejected(uri: str, hint: str) -> None:
    assert hint in error_for(uri)


def test_bigquery_uris_name_project_dataset_and_table() -> None:
    assert normalize_uri("BigQuery://proj/ds/t/?b=1#x") == "bigquery://proj/ds/t?b=1"
    assert "must contain a project ID" in error_for("bigquery:///ds/t")
    assert "exactly /dataset/table, got 1" in error_for("bigquery://proj/ds")
    assert "exactly /dataset/table, got 3" in error_for("bigquery://proj/ds/t/x")


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("kafka://broker:9092/orders", "kafka://broker:9092/orders"),
        ("KAFKA://Broker/orders.v1_x-y/", "kafka://Broker/orders.v1_x-y"),
        ("kafka://b1:9092,b2:9092/orders", "kafka://b1:9092,b2:9092/orders"),
        # Airflow checks only that there is a topic, not what Kafka accepts as one.
        ("kafka://broker/a/b", "kafka://broker/a/b"),
        ("kafka://broker/a%20b", "kafka://broker/a%20b"),
        ("kafka://broker/" + "t" * 250, "kafka://broker/" + "t" * 250),
    ],
)
def test_kafka_uris_with_host_and_topic_pass(uri: str, expected: str) -> None:
    assert normalize_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "hint"),
    [
        ("kafka:///orders", "must contain a bootstrap server host"),
        ("kafka://broker", "must contain a topic name"),
        ("kafka://broker/", "must contain a topic name"),
        ("kafka://broker//", "must contain a topic name"),
    ],
)
def test_invalid_kafka_uris_are_rejected(uri: str, hint: str) -> None:
    assert hint in error_for(uri)


# --- length ---------------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["s3://bucket/", "x-thing://", "", "https://h/"])
def test_the_normalised_uri_may_not_exceed_the_length_limit(prefix: str) -> None:
    fits = prefix + "k" * (MAX_URI_LENGTH - len(prefix))
    assert normalize_uri(fits) == fits
    message = error_for(fits + "k")
    assert str(MAX_URI_LENGTH) in message
    assert "..." in message


def test_the_limit_applies_after_normalisation() -> None:
    key = "s3://bucket/" + "k" * (MAX_URI_LENGTH - len("s3://bucket/"))
    assert normalize_uri(key + "#fragment") == key
    table = "postgres://db/app/public/" + "t" * (MAX_URI_LENGTH - len("postgres://db/app/public/") - 4)
    assert "1501 characters" in error_for(table)  # ":5432" made it longer


# --- idempotence on the examples --------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "S3://Bucket//key//?b=2&a=1&flag#frag",
        "postgresql://db/app//orders/",
        "mysql://db:/app/orders",
        "file:/data/x.csv",
        "foo:",
        "file:",
        "https://h/?a=%C3%A8&b=x%20y",
        "X-Thing://A/B/",
        " s3://b/k\t",
        "mariadb://db/app/orders",
        "redshift://c:/d/s/t",
    ],
)
def test_normalising_twice_changes_nothing(uri: str) -> None:
    once = normalize_uri(uri)
    assert normalize_uri(once) == once


# --- properties -------------------------------------------------------------------------------

HOST_CHARS = string.ascii_letters + string.digits + "-._~!$&'()*+,;="
PCHARS = string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@"
TOPIC_CHARS = string.ascii_letters + string.digits + "._-"
# Airflow decodes the query as UTF-8: other bytes are refused, so valid URIs encode characters.
PERCENT = st.characters(codec="utf-8").map(lambda c: urllib.parse.quote(c, safe=""))
SEGMENT = st.lists(st.sampled_from(PCHARS) | PERCENT, max_size=8).map("".join)
HOST = st.text(HOST_CHARS, min_size=1, max_size=12) | st.sampled_from(
    ["[::1]", "[FE80::1:2]", "[2001:db8::7]"]
)
PORT = st.none() | st.just("") | st.integers(0, 65535).map(str)
QUERY = st.lists(st.tuples(SEGMENT, SEGMENT), max_size=4).map(lambda ps: "&".join(f"{k}={v}" for k, v in ps))
FRAGMENT = st.text(RFC3986_CHARS, max_size=8)


def authority(host: str, port: str | None) -> str:
    return host if port is None else f"{host}:{port}"


@st.composite
def valid_uris(draw: st.DrawFn) -> str:
    """URIs of every scheme family, valid by construction, in random case and with noise."""
    family = draw(st.sampled_from(["generic", "bucket", "file", "postgres", "mysql", "kafka", "x", "none"]))
    scheme_case = draw(st.sampled_from([str.lower, str.upper, str.title]))
    netloc = authority(draw(HOST), draw(PORT))
    trailing = draw(st.sampled_from(["", "/", "//"]))
    query = draw(st.none() | QUERY)
    fragment = draw(st.none() | FRAGMENT)
    if family == "generic":
        scheme = draw(st.sampled_from(["https", "snowflake", "foo+bar", "a.b-c", "sftp"]))
        if draw(st.booleans()):
            uri = f"{scheme}://{netloc}" + "".join("/" + s for s in draw(st.lists(SEGMENT, max_size=4)))
        else:  # an opaque path: no authority, so no empty first segment that would read as one
            uri = f"{scheme}:" + "/".join(draw(st.lists(SEGMENT.filter(bool), max_size=4)))
    elif family == "bucket":
        scheme = draw(st.sampled_from(["s3", "s3a", "gs", "gcs"]))
        uri = f"{scheme}://{netloc}" + "".join("/" + s for s in draw(st.lists(SEGMENT, max_size=4)))
    elif family == "file":
        scheme = "file"
        segments = draw(st.lists(SEGMENT.filter(bool), min_size=1, max_size=4))
        uri = "file://" + draw(st.sampled_from(["", "localhost"])) + "".join("/" + s for s in segments)
    elif family in {"postgres", "mysql"}:
        scheme = draw(st.sampled_from(["postgres", "postgresql"])) if family == "postgres" else "mysql"
        count = 3 if family == "postgres" else 2
        segments = draw(st.lists(SEGMENT.filter(bool), min_size=count, max_size=count))
        uri = f"{scheme}://{netloc}/" + "/".join(segments)
    elif family == "kafka":
        scheme = "kafka"
        uri = f"kafka://{netloc}/" + draw(st.text(TOPIC_CHARS, min_size=1, max_size=20))
    elif family == "x":
        scheme = "x-" + draw(st.text(string.ascii_lowercase, min_size=1, max_size=6))
        uri = f"{scheme}:" + draw(st.text(RFC3986_CHARS, max_size=20))
    else:
        plain = "".join(c for c in RFC3986_CHARS if c not in ":[]")
        return draw(st.text(plain, min_size=1, max_size=30))
    uri = scheme_case(scheme) + uri[len(scheme) :] + trailing
    if query is not None:
        uri += "?" + query
    if fragment is not None:
        uri += "#" + fragment
    return uri


@given(valid_uris())
def test_normalisation_is_idempotent_on_valid_uris(uri: str) -> None:
    once = normalize_uri(uri)
    assert normalize_uri(once) == once
    assert once.isascii()


@given(st.text(RFC3986_CHARS + "%", min_size=1, max_size=40))
def test_normalisation_is_idempotent_whenever_it_succeeds(uri: str) -> None:
    try:
        once = normalize_uri(uri)
    except AssetUriError:
        return
    assert normalize_uri(once) == once


@given(st.text(max_size=20), st.characters(min_codepoint=128), st.text(max_size=20))
def test_any_non_ascii_character_is_rejected(before: str, char: str, after: str) -> None:
    assume("@" not in before + after)  # a password is the first thing reported
    assume((before + char + after).strip())  # so is a URI of whitespace only (U+00A0 is whitespace)
    assert "non-ASCII" in error_for(before + char + after)


@given(
    st.text(max_size=40)
    | st.text(RFC3986_CHARS + '% \\{}|^"<>`\t', max_size=40)
    | st.builds(
        lambda s, r: s + "://" + r,
        st.sampled_from(["s3", "postgres", "kafka", "file", "airflow", "x-a", "h"]),
        st.text(RFC3986_CHARS + "%", max_size=30),
    )
    | st.integers()
    | st.none()
    | st.binary(max_size=10)
)
def test_arbitrary_input_yields_a_str_or_an_asset_uri_error(value: object) -> None:
    try:
        result = normalize_uri(value)  # type: ignore[arg-type]
    except AssetUriError:
        return
    assert isinstance(result, str)
    assert normalize_uri(result) == result
