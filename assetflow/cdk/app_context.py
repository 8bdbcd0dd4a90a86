"""The feature flags in ``cdk.json``, applied alike when the CDK CLI, ``python app.py`` or a test builds the app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def feature_flags(project_root: Path) -> dict[str, Any]:
    """The ``context`` of the project's ``cdk.json`` (the CLI passes it itself; a direct run would not)."""
    document = json.loads((project_root / "cdk.json").read_text())
    return dict(document.get("context", {}))
