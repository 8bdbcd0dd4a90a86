"""Errors the job-side helper raises."""

from __future__ import annotations


class AssetflowJobError(Exception):
    """Base class of the job-side helper's errors."""


class RunContextError(AssetflowJobError):
    """The run context is missing, unreadable or not a document this helper understands."""


class UndeclaredOutletError(AssetflowJobError, LookupError):
    """The job set extra on, or added to, something that is not one of the pipeline's outlets."""


class UndeclaredInletError(AssetflowJobError, LookupError):
    """The job read inlet events of something that is not one of the pipeline's inlet assets."""


class ExtraReferenceError(AssetflowJobError):
    """An event's extra is stored by reference, and the object is missing or not the one referenced."""
