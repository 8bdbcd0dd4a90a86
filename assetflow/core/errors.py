"""Errors raised by the pure core."""

from __future__ import annotations


class AssetflowError(Exception):
    """Base class of every error that assetflow raises on purpose."""


class DefinitionError(AssetflowError, ValueError):
    """A declaration (asset, watcher, pipeline, schedule) is invalid; the message says how to fix it."""


class CatalogError(AssetflowError):
    """The catalog as a whole is invalid; ``diagnostics`` lists every problem found."""

    def __init__(self, diagnostics: list[str]) -> None:
        self.diagnostics = diagnostics
        super().__init__("invalid catalog:\n" + "\n".join(f"  - {d}" for d in diagnostics))


class DocumentError(AssetflowError, ValueError):
    """A serialised document (catalog, event, run) does not have the expected shape or version."""


class ConflictError(AssetflowError):
    """Another writer changed the state first (a lost optimistic-concurrency race); re-read and retry."""


class AlreadySubmittedError(ConflictError):
    """The run was submitted already, as another job run: a second job run id is refused, not retried."""


class NotFoundError(AssetflowError, LookupError):
    """The asked-for record (run, pipeline, asset) does not exist."""


class StoreUnavailableError(AssetflowError):
    """The store refused or failed the request (throttling, a network error); retrying later may succeed."""
