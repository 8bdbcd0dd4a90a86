"""The names the job-side helper shares with assetflow's functions: one definition, imported by both.

The functions write the run context and read the outlet metadata; the helper reads the one and writes the
other on EMR Serverless, where the assetflow package is not installed. Both import these names from here
(this module needs nothing but Python 3.9), so the two sides can never drift apart.
"""

from __future__ import annotations

from datetime import datetime, timezone

#: The job argument that names the run context: ``--assetflow-context s3://bucket/runs/<p>/<run>/context.json``.
CONTEXT_ARGUMENT = "--assetflow-context"
#: The job argument that names where this run's outlet metadata goes, when the deployment makes that place
#: secret to the run (``runs/<pipeline>/<run_id>/<token>/outlets.json``, the token known to the run alone):
#: it overrides the context's ``outlet_metadata_uri``.
OUTLETS_ARGUMENT = "--assetflow-outlets"
#: The ``format`` of the run context document.
CONTEXT_FORMAT = "assetflow.run-context"
#: The ``format`` of the outlet metadata document a successful job writes.
OUTLET_METADATA_FORMAT = "assetflow.outlet-metadata"
#: The version of both documents.
DOCUMENT_VERSION = 1
#: Where a run's context and outlet metadata live in the runs bucket: ``runs/<pipeline>/<run_id>/``.
RUNS_PREFIX = "runs/"
CONTEXT_FILE = "context.json"
OUTLET_METADATA_FILE = "outlets.json"
#: The key of an extra stored by reference: ``{"extra_ref": {"uri", "bytes", "sha256"}, ...}``.
REF_KEY = "extra_ref"
#: The ``--py-files`` archive under the runs bucket's code prefix: the helper and the project's job modules.
PY_FILES_ARCHIVE = "assetflow_jobs.zip"
#: A run context small enough travels in the job's arguments as ``data:<INLINE_CONTEXT_MEDIA_TYPE>,<base64>``
#: instead of an S3 object (one S3 PUT and one GET less per run).
INLINE_CONTEXT_PREFIX = "data:application/json;base64,"
#: The longest inline context argument: older EMR Serverless API references cap an argument at 10,280
#: characters; larger contexts go through S3.
INLINE_CONTEXT_MAX_CHARS = 10_000


def format_timestamp(moment: datetime) -> str:
    """A timestamp as the documents write it: UTC ISO-8601 with microseconds and ``Z``, fixed width.

    Fixed width makes the strings sort as the times do (``isoformat`` pads years before 1000, which
    ``strftime("%Y")`` does not).

    Raises:
        ValueError: ``moment`` is naive.
    """
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_timestamp(text: str, *, naive_is_utc: bool = False) -> datetime:
    """Parse a document's timestamp (or any ISO-8601 with an offset) into an aware UTC datetime.

    ``naive_is_utc`` takes a timestamp without an offset as UTC; otherwise it is refused.

    Raises:
        ValueError: ``text`` is not an ISO-8601 timestamp, or has no offset (without ``naive_is_utc``).
    """
    if not isinstance(text, str):
        raise ValueError(f"a timestamp must be a string, got {type(text).__name__}")
    value = text.strip()
    if value.endswith(("Z", "z")):  # Python 3.9's fromisoformat does not take the "Z" suffix
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        if not naive_is_utc:
            raise ValueError(f"timestamp {text!r} has no UTC offset")
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


#: The longest data version an event carries (``Metadata(..., version=)``; an Iceberg snapshot id, an ETag
#: and a SHA-256 are far shorter).
MAX_VERSION_CHARS = 256
