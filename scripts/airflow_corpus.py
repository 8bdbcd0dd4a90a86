"""Record how Apache Airflow checks and normalises asset URIs, as the fixture of the parity tests.

Run it with an interpreter that has the Airflow task SDK and the amazon, google, postgres, mysql and
apache-kafka providers installed (they register the per-scheme URI normalisers), never the project's
own one::

    /work/airflow-venv/bin/python scripts/airflow_corpus.py [--out tests/fixtures/airflow/uri_corpus.json]

For each URI of the built-in corpus it builds ``Asset(name=..., uri=URI)`` with a fixed name, so only
the URI's rules are measured, and records Airflow's normalised URI, or the refusal (error class and
message), and any warning. Airflow refuses non-ASCII only when its metadata database is MySQL; the
outcome under that setting is recorded too, where it differs. The output is sorted and stable.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "airflow" / "uri_corpus.json"
DISTRIBUTIONS = (
    "apache-airflow-task-sdk",
    "apache-airflow-core",
    "apache-airflow-providers-amazon",
    "apache-airflow-providers-google",
    "apache-airflow-providers-postgres",
    "apache-airflow-providers-mysql",
    "apache-airflow-providers-apache-kafka",
    "apache-airflow-providers-common-io",
)
ASSET_NAME = "corpus"
MESSAGE_LENGTH = 200
LIMIT = 1500


def _ordinary() -> list[str]:
    """Everyday URIs of each scheme, each also with the variations people write."""
    bases = [
        "s3://my-bucket/raw/orders.csv",
        "s3://My-Bucket/Raw/Orders",
        "s3://bucket/dir/sub/part-0000.parquet",
        "s3a://bucket/path/to/key",
        "s3n://bucket/key",
        "file:///data/input.csv",
        "file://localhost/data/input.csv",
        "postgres://db.example.com/app/public/orders",
        "postgres://db:6543/app/public/orders",
        "postgresql://db/app/public/orders",
        "mysql://db/app/orders",
        "mysql://db:3307/app/orders",
        "mariadb://db/app/orders",
        "redshift://cluster.example.com/dev/public/sales",
        "redshift://cluster:5440/dev/public/sales",
        "bigquery://my-project/dataset/table",
        "gs://bucket/path/object.json",
        "gcs://bucket/path/object.json",
        "gcp://project/whatever",
        "kafka://broker:9092/orders",
        "kafka://b1:9092,b2:9092/orders.v1",
        "trino://coordinator:8080/catalog/schema/table",
        "hive://metastore/db/table",
        "snowflake://account/DB/SCHEMA/TABLE",
        "https://example.com/data/file.csv",
        "http://Example.COM/Path",
        "sftp://host/home/user/file",
        "hdfs://namenode:8020/warehouse/t",
        "abfs://container@account.dfs.core.windows.net/path",
        "delta://lake/table",
        "sqs://queue-name",
        "x-my-thing://foobarbaz",
        "X-My-Thing://Foo/Bar",
        "x-Team:orders",
        "example_asset",
        "relative/path/file.csv",
        "//example/asset",
    ]
    uris = []
    for base in bases:
        scheme, colon, rest = base.partition(":")
        upper = scheme.upper() + colon + rest if colon else base.upper()
        uris += [base, base + "/", base + "?b=2&a=1", base + "#fragment", upper, base + "//?z=&y=1#f"]
    return uris


def _edges() -> list[str]:
    """The cases Airflow's sanitiser and the providers' normalisers treat specially."""
    return [
        # reference-doc examples
        "s3://asset-bucket/example.csv",
        "s3://",
        "airflow://example_asset",
        "èxample_datašet",
        # blanks and whitespace
        "",
        " ",
        "   ",
        "\t",
        "\n \r",
        " s3://bucket/key",
        "s3://bucket/key ",
        "s3://bucket/key\n",
        "\ts3://bucket/key",
        "\x01s3://bucket/key",
        "s3://bucket/a\tb",
        "s3://bucket/a\rb",
        "name with space",
        " name",
        # characters outside RFC 3986
        "s3://bucket/ke y",
        'S3://bucket/"quoted"',
        "s3://bucket/<a>",
        "s3://bucket/a`b",
        "s3://bucket/a\x00",
        "s3://bucket/{a,b}.csv",
        "s3://bucket/a|b",
        "s3://bucket/^data",
        "s3://bucket/data}",
        "file:///C:\\data\\x.csv",
        "C:\\data\\x.csv",
        "C:/data/x.csv",
        "x-thing://a b",
        "x-thing://a\\b",
        # percent-encoding
        "s3://bucket/a%20b%2Fc%c3%a8",
        "s3://bucket/100%",
        "s3://bucket/%zz",
        "s3://bucket/%4",
        "a%g1",
        "s3://bucket/%C3%A8xample",
        "s3://b%20c/key",
        # userinfo
        "s3://user@bucket/key",
        "s3://user:s3cr3t@bucket/key",
        "s3://:s3cr3t@bucket/key",
        "s3://user:@bucket/key",
        "s3://@bucket/key",
        "s3://:@bucket/key",
        "s3://a@b@bucket/key",
        "s3://user:p%40ss@bucket/key",
        "https://u:s3cr3t@Example.com:8443/x?a=1",
        "https://user@Example.com/x",
        "postgres://admin:s3cr3t@db/app/public/orders",
        "postgres://admin@db/app/public/orders",
        "postgres://admin@db:5433/app/public/orders",
        "kafka://svc:s3cr3t@broker:9092/orders",
        "file://admin:s3cr3t@/data/orders.csv",
        "x-db://admin:s3cr3t@db/orders",
        "x-db://admin@db/orders",
        "//user:s3cr3t@host/x",
        "//user@host/x",
        "airflow://user:s3cr3t@host/x",
        "s3://bucket/team@example.com/file",
        "https://host/x?owner=a@b",
        # ports
        "https://host:8443/x",
        "https://host:abc/x",
        "https://host:70000/",
        "https://host:/x",
        "https://a:b:c/",
        "https://host:-1/x",
        "s3://bucket:80/key",
        "s3://bucket:abc/key",
        "s3://:80/key",
        "postgres://db:/app/public/orders",
        "postgres://db:abc/app/public/orders",
        "postgres://db:1:2/app/public/orders",
        "postgres://db:70000/app/public/orders",
        "postgres://db:0/app/public/orders",
        "postgres://db:+1/app/public/orders",
        "postgres://db: 1/app/public/orders",
        "mysql://db:abc/app/orders",
        "mysql://db:3306:3307/app/orders",
        "redshift://cluster:abc/dev/public/sales",
        "redshift://cluster:/dev/public/sales",
        "kafka://broker:abc/orders",
        "kafka://broker:1:2/orders",
        # IPv6 and unparseable hosts
        "https://[::1]:8080/",
        "s3://[::1]/key",
        "https://[FE80::1]/x",
        "postgres://[::1]/app/public/orders",
        "postgres://[::1]:6000/app/public/orders",
        "s3://[::1]x:80/",
        "https://[::1/x",
        "https://[zz]/x",
        "https://a[b]/x",
        "https://::1/x",
        "x-thing://[zz]/x",
        "//[zz]/x",
        # empty host and paths
        "s3:///key",
        "s3:bucket/key",
        "s3:",
        "s3:/",
        "s3://bucket",
        "s3://bucket/",
        "s3://bucket//",
        "s3://bucket/a//b",
        "s3://bucket/dir///",
        "s3a://",
        "gs://",
        "gs:///object",
        "gcs://",
        "gcs:///object",
        "gcp://",
        "file://",
        "file:///",
        "file://host",
        "file:",
        "file:/data/input.csv",
        "file:data/input.csv",
        "file:////server/share",
        "foo:////x",
        "foo:",
        "foo:bar",
        "foo://",
        "https://host",
        "https://Example.com/path/",
        # known schemes: segment counts and names
        "postgres:///app/public/orders",
        "postgres://:5432/app/public/orders",
        "postgres://db/app/orders",
        "postgres://db/a/b/c/d",
        "postgres://db",
        "postgres://db/",
        "postgres://db//public/orders",
        "postgres://db/app//orders",
        "postgres://db/app/public/",
        "postgres://db/app/public/orders/",
        "POSTGRESQL://DB/App/Public/Orders",
        "postgres://db/app/public/orders?sslmode=require&application_name=x",
        "mysql:///app/orders",
        "mysql://db/app/public/orders",
        "mysql://db/app",
        "mysql://db//orders",
        "mysql://db/app/",
        "MariaDB://DB/App/Orders",
        "mariadb://db:3307/app/orders",
        "mariadb://db/app",
        "redshift:///dev/public/sales",
        "redshift://cluster/dev/sales",
        "redshift://cluster/dev//sales",
        "redshift://cluster/a/b/c/d",
        "bigquery://",
        "bigquery:///dataset/table",
        "bigquery://project/dataset",
        "bigquery://project/dataset/table/extra",
        "bigquery://project//table",
        "kafka:///orders",
        "kafka://broker",
        "kafka://broker/",
        "kafka://broker/a/b",
        "kafka://broker/a%20b",
        "kafka://broker/a b",
        "kafka://broker/" + "t" * 250,
        "kafka://broker/orders!",
        "kafka://broker//",
        "KAFKA://Broker/orders.v1_x-y/",
        "trino://coordinator/catalog",
        "hive://",
        # query and fragment
        "s3://bucket/key?b=2&a=1&a=0",
        "s3://bucket/key?flag&a=1",
        "s3://bucket/key?flag",
        "s3://bucket/key?a=",
        "s3://bucket/key?=1",
        "s3://bucket/key?&&",
        "s3://bucket/key?",
        "s3://bucket/key?a=x+y",
        "s3://bucket/key?a=x%20y",
        "s3://bucket/key?a=%2F",
        "s3://bucket/key?a=%2B",
        "s3://bucket/key?a=1;b=2",
        "s3://bucket/key?a=%C3%A8",
        "s3://bucket/key?a=%FF",
        "https://host/?a=%FF&b=%FE",
        "s3://bucket/key?a=%25",
        "s3://bucket/key?a=b=c",
        "s3://bucket/key?B=1&a=2",
        "s3://bucket/key#part",
        "s3://bucket/#x",
        "s3://bucket/key?b=1&a=2#frag",
        "s3://bucket/key#",
        "x-thing://a?b=1&a=2#f",
        "//Example/Asset/?b=1&a=2#frag",
        # case of scheme and host
        "S3://Bucket/Key",
        "HTTPS://Example.com/A",
        "Snowflake://Account/DB",
        "s3://example/asset",
        "s3://Example/asset",
        "X-THING://A",
        "x-thing://",
        "x-:foo",
        "x-",
        # scheme syntax
        "1abc://x",
        "a+b.c-d://x/y/",
        "+a://x",
        ":x",
        "://x",
        "s 3://bucket/key",
        # the airflow scheme, and what only resembles it
        "AIRFLOW://x",
        "Airflow:x",
        "airflow:",
        "airflow",
        "airflow/x",
        "x-airflow://example_asset",
        "airflows://x",
        "assetflow://x",
        "AssetFlow://x/y",
        # non-ASCII
        "s3://bucket/è",
        "s3://bückét/key",
        "x-thing://ü",
        "ñame",
        "s3://bucket/key?a=è",
        "s3://admin:pässword@bucket/key",
        "s3://bucket/\u00a0",
        "s3://bucket/\u2028",
        "s3://bucket/\ud800",
        "\uff53\uff13://bucket/key",  # full-width "s3"
    ]


def _lengths() -> list[str]:
    """URIs around Airflow's 1,500-character limit, before and after normalisation."""
    uris = []
    for total in (LIMIT - 1, LIMIT, LIMIT + 1):
        for prefix in ("s3://bucket/", "x-thing://", "", "gcp://p/", "https://h/"):
            uris.append(prefix + "k" * (total - len(prefix)))
    # Normalisation that brings a URI under the limit, or over it.
    uris.append("s3://bucket/" + "k" * (LIMIT - 12) + "#fragment")
    uris.append("s3://bucket/" + "k" * (LIMIT - 12) + "/")
    uris.append("S3://bucket/" + "k" * (LIMIT - 12) + "?a=")
    uris.append("postgres://db/app/public/" + "t" * (LIMIT - 25 - 5))
    uris.append("postgres://db/app/public/" + "t" * (LIMIT - 25 - 4))
    uris.append("postgres://db/app/public/" + "t" * (LIMIT - 25 - 6))
    return uris


def corpus() -> list[str]:
    """All URIs, without duplicates, in a stable order."""
    return sorted(set(_ordinary() + _edges() + _lengths()))


def airflow_outcome(uri: str) -> dict[str, Any]:
    """Airflow's normalised URI for ``uri``, or its refusal, with any warning."""
    from airflow.sdk import Asset

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: dict[str, Any] = {"uri": Asset(name=ASSET_NAME, uri=uri).uri}
        except Exception as exc:  # every refusal is recorded, whatever its class
            result = {"error": type(exc).__name__, "message": str(exc)[:MESSAGE_LENGTH]}
    found = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    if found:
        result["warnings"] = found
    return result


def _outcome_with_mysql_metadata_db(uri: str) -> dict[str, Any]:
    # Airflow reads SQL_ALCHEMY_CONN once, at import; a real MySQL setting also needs mysqlclient,
    # which does not build here, so set the module's copy as that configuration would.
    from airflow.sdk.definitions import asset

    saved = asset.SQL_ALCHEMY_CONN
    asset.SQL_ALCHEMY_CONN = "mysql+mysqldb://airflow@localhost/airflow"
    try:
        return airflow_outcome(uri)
    finally:
        asset.SQL_ALCHEMY_CONN = saved


def versions() -> dict[str, str]:
    """The versions of Python, the task SDK and the providers that the corpus is measured with."""
    versions = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def build() -> dict[str, Any]:
    """Run every corpus URI through Airflow and return the fixture document."""
    entries = []
    for uri in corpus():
        entry = {"input": uri, "airflow": airflow_outcome(uri)}
        mysql = _outcome_with_mysql_metadata_db(uri)
        if mysql != entry["airflow"]:
            entry["airflow_mysql_metadata_db"] = mysql
        entries.append(entry)
    return {
        "about": (
            "How Apache Airflow checks and normalises asset URIs: Asset(name='corpus', uri=input).uri, "
            "or the refusal, and any warning; 'airflow_mysql_metadata_db' where a MySQL metadata database "
            "changes the outcome. Written by scripts/airflow_corpus.py; do not edit by hand."
        ),
        "versions": versions(),
        "entries": entries,
    }


def main(argv: list[str] | None = None) -> int:
    """Write the fixture; returns the process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as home:
        # Airflow creates $AIRFLOW_HOME/logs on import: keep it out of the user's home.
        os.environ["AIRFLOW_HOME"] = home
        try:
            document = build()
        except ImportError as exc:
            print(f"airflow.sdk is not importable with {sys.executable}: {exc}", file=sys.stderr)
            return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=1, sort_keys=True, ensure_ascii=True) + "\n")
    refused = sum("error" in e["airflow"] for e in document["entries"])
    print(f"{len(document['entries'])} URIs ({refused} refused by Airflow) written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
