"""``Metadata``: the extra a job attaches to one of its outlet events, optionally through an alias."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assetflow.core.conditions import Asset, AssetAlias
from assetflow.core.errors import DefinitionError
from assetflow.core.jsonvalue import freeze_json, thaw_json


@dataclass(frozen=True)
class Metadata:
    """Extra for the outlet event of ``asset``; with ``alias``, the asset is added to that alias at run time.

    Raises:
        DefinitionError: the asset, extra or alias is invalid.

    """

    asset: Asset
    extra: Mapping[str, Any] = field(default_factory=dict)
    alias: str | None = None
    #: The data version of what the job wrote (its outlet event's ``version``: skip_unchanged consumers use it).
    version: str | None = None

    def __post_init__(self) -> None:
        asset = Asset(self.asset) if isinstance(self.asset, str) else self.asset
        if not isinstance(asset, Asset):
            raise DefinitionError(
                f"Metadata: asset must be an Asset or a URI, not {type(self.asset).__name__}"
            )
        alias = self.alias.name if isinstance(self.alias, AssetAlias) else self.alias
        if alias is not None:
            AssetAlias(alias)  # validates the name
        if self.version is not None and (not isinstance(self.version, str) or not self.version):
            raise DefinitionError("Metadata: version must be a non-empty string or None")
        object.__setattr__(self, "asset", asset)
        object.__setattr__(self, "alias", alias)
        object.__setattr__(self, "extra", freeze_json(dict(self.extra), "Metadata extra"))

    def to_json(self) -> dict[str, Any]:
        """The outlet-metadata document's event entry (``"version"`` only when set)."""
        doc: dict[str, Any] = {"asset": self.asset.uri, "extra": thaw_json(self.extra), "alias": self.alias}
        if self.version is not None:
            doc["version"] = self.version
        return doc
