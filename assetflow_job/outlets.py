"""``outlet_events``: the extra of each declared asset outlet and the assets added to alias outlets."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from assetflow_job.errors import UndeclaredOutletError
from assetflow_job.refs import (
    AliasRef,
    AssetRef,
    alias_name,
    asset_uri,
    check_version,
    json_copy,
    match_key,
    resolve_key,
)

#: A check's name: letters, digits and ``_.:-``, at most 64 characters (the scheduler refuses others).
_CHECK_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class AssetOutletEvent:
    """The event a declared asset outlet gets when the run succeeds; set ``extra`` to annotate it.

    ``check(name, passed, blocking=)`` reports a check of the data behind it: the checks travel with the event
    (``source.checks``), and a failed *blocking* check holds the event from every downstream condition until a
    later event passes or an operator releases it (``assetflow events release EVENT_ID``).
    """

    def __init__(self, uri: str) -> None:
        self.asset = uri
        self._extra: dict[str, Any] = {}
        self._version: str | None = None
        self._checks: dict[str, dict[str, Any]] = {}

    @property
    def version(self) -> str | None:
        """The data version the job wrote (``skip_unchanged`` consumers run once per version); None: unversioned."""
        return self._version

    @version.setter
    def version(self, value: object) -> None:
        self._version = check_version(value)

    def check(self, name: str, passed: bool, blocking: bool = False) -> None:
        """Report a check on this outlet (reporting a name again replaces its verdict).

        Raises:
            ValueError: the name is not 1 to 64 letters, digits or ``_.:-``.
            TypeError: ``passed`` or ``blocking`` is not a bool.

        """
        if not isinstance(name, str) or not _CHECK_NAME.match(name):
            raise ValueError(f"a check's name is 1 to 64 letters, digits or '_.:-', got {name!r}")
        if not isinstance(passed, bool) or not isinstance(blocking, bool):
            raise TypeError("passed and blocking are True or False")
        self._checks[name] = {"name": name, "passed": passed, "blocking": blocking}

    @property
    def checks(self) -> list[dict[str, Any]]:
        """The checks reported so far, in the order they were first reported."""
        return [dict(c) for c in self._checks.values()]

    @property
    def extra(self) -> dict[str, Any]:
        """The event's extra; a plain dict, so ``extra["k"] = v`` works as well as assigning it whole."""
        return self._extra

    @extra.setter
    def extra(self, value: Mapping[str, Any]) -> None:
        self._extra = json_copy(value, what=f"extra of {self.asset!r}")

    def __repr__(self) -> str:
        return f"<AssetOutletEvent {self.asset!r} extra={self._extra!r} checks={len(self._checks)}>"


class _AliasAddition:
    """One distinct (asset, extra) added to one or more aliases."""

    def __init__(self, uri: str, extra: dict[str, Any], alias: str) -> None:
        self.uri = uri
        self.extra = extra
        self.aliases = [alias]


class AliasOutletEvents:
    """A declared alias outlet; ``add`` decides at run time which asset the alias resolves to."""

    def __init__(self, name: str, owner: OutletEventAccessors) -> None:
        self.name = name
        self._owner = owner

    def add(self, asset: object, extra: Mapping[str, Any] | None = None) -> None:
        """Add an asset event to this alias: one per distinct (asset, extra), as Airflow does.

        Raises:
            TypeError: when ``asset`` is not an asset or ``extra`` is not JSON.

        """
        self._owner._add_to_alias(self.name, asset_uri(asset), json_copy(extra, what="extra"))

    def __repr__(self) -> str:
        return f"<AliasOutletEvents {self.name!r}>"


class OutletEventAccessors:
    """``ctx.outlet_events[key]``: asset outlets by URI or asset object, alias outlets by AliasRef."""

    def __init__(self, assets: Sequence[str], aliases: Sequence[str]) -> None:
        self._assets: dict[str, AssetOutletEvent] = {}
        for uri in assets:
            self._assets.setdefault(match_key(uri), AssetOutletEvent(uri))
        self._aliases = {name: AliasOutletEvents(name, self) for name in aliases}
        self._additions: dict[tuple[str, str], _AliasAddition] = {}

    def __getitem__(self, key: object) -> Any:
        ref = resolve_key(key)
        if isinstance(ref, AliasRef):
            alias = self._aliases.get(ref.name)
            if alias is None:
                raise UndeclaredOutletError(
                    f"the alias {ref.name!r} is not an outlet of this pipeline (declared aliases: "
                    f"{self._declared(self._aliases)}); declare it in the pipeline's outlets"
                )
            return alias
        event = self._assets.get(match_key(ref.uri))
        if event is None:
            raise UndeclaredOutletError(
                f"{ref.uri!r} is not an asset outlet of this pipeline "
                f"(declared assets: {self._declared(a.asset for a in self._assets.values())}); "
                "declare it in the pipeline's outlets, or add it to a declared alias outlet"
            )
        return event

    def __contains__(self, key: object) -> bool:
        try:
            ref = resolve_key(key)
        except TypeError:
            return False
        if isinstance(ref, AliasRef):
            return ref.name in self._aliases
        return match_key(ref.uri) in self._assets

    def __iter__(self) -> Iterator[AssetRef | AliasRef]:
        for event in self._assets.values():
            yield AssetRef(event.asset)
        for name in self._aliases:
            yield AliasRef(name)

    def __len__(self) -> int:
        return len(self._assets) + len(self._aliases)

    @staticmethod
    def _declared(names: Any) -> str:
        listed = sorted(names)
        return ", ".join(repr(n) for n in listed) if listed else "none"

    def _add_to_alias(self, alias: str, uri: str, extra: dict[str, Any]) -> None:
        # The same asset with the same extra is one event, however many aliases it is added to.
        key = (match_key(uri), json.dumps(extra, sort_keys=True))
        addition = self._additions.get(key)
        if addition is None:
            self._additions[key] = _AliasAddition(match_key(uri), extra, alias)
        elif alias not in addition.aliases:
            addition.aliases.append(alias)

    def emit(self, metadata: Any) -> None:
        """Apply a Metadata: merge its extra into an asset outlet's, or add its asset to its alias."""
        if metadata.alias is not None:
            self[AliasRef(alias_name(metadata.alias))].add(metadata.asset, extra=metadata.extra)
            return
        event = self[AssetRef(metadata.asset)]
        event.extra = {**event.extra, **metadata.extra}
        if getattr(metadata, "version", None) is not None:
            event.version = metadata.version

    def events(self) -> list[dict[str, Any]]:
        """Return the outlet events in the contract's shape: declared assets first, then alias additions.

        Every declared asset outlet gets one event; an alias addition names the first alias it was added
        to in ``alias`` and every one of them in ``aliases``.
        """
        out: list[dict[str, Any]] = []
        for event in self._assets.values():
            entry: dict[str, Any] = {
                "asset": event.asset,
                "extra": json_copy(event.extra, what=f"extra of {event.asset!r}"),
                "alias": None,
                **({"version": event.version} if event.version is not None else {}),
            }
            if event.checks:
                entry["checks"] = event.checks
            out.append(entry)
        out.extend(
            {"asset": a.uri, "extra": a.extra, "alias": a.aliases[0], "aliases": list(a.aliases)}
            for a in self._additions.values()
        )
        return out
