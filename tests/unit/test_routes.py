"""The one route table agrees with the Lambda resolver, the OpenAPI document and the copy at the repo root.

API Gateway's routes and the IAM policies are checked against it on the synthesised template
(``tests/infra/test_api_alarms_outputs.py``), the local runtime's server in
``tests/integration/test_local_api_server.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assetflow.functions import handle_api
from assetflow.openapi import openapi_document
from assetflow.routes import ROUTES, Route, RouteTableError, allowed_methods, by_operation, check_table

ROOT = Path(__file__).resolve().parents[2]


def _table() -> set[tuple[str, str]]:
    return {(r.method, r.path) for r in ROUTES}


def test_the_resolver_serves_exactly_the_table() -> None:
    # Powertools' own OpenAPI generator reads the routes the resolver registered: an independent view of it.
    schema = handle_api.app.get_openapi_schema(title="assetflow", version="1")
    served = {
        (method.upper(), path)
        for path, item in (schema.paths or {}).items()
        for method in item.model_fields_set
        if getattr(item, method) is not None
    }
    assert served == _table()


def test_the_openapi_document_has_exactly_the_tables_routes_with_their_permission() -> None:
    doc = openapi_document()
    documented = {
        (method.upper(), path): op for path, item in doc["paths"].items() for method, op in item.items()
    }
    assert set(documented) == _table()
    for route in ROUTES:
        operation = documented[(route.method, route.path)]
        assert operation["operationId"] == route.operation
        assert operation["x-assetflow-permission"] == route.permission
        assert str(route.status) in operation["responses"]
        names = {p["name"] for p in operation.get("parameters", []) if p["in"] in ("path", "query")}
        assert names == {*route.variables, *route.query}


def test_every_schema_reference_resolves() -> None:
    doc = openapi_document()
    text = json.dumps(doc)
    refs = {part.split('"', 1)[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs <= set(doc["components"]["schemas"])


def test_the_committed_openapi_json_is_the_generated_one() -> None:
    committed = json.loads((ROOT / "openapi.json").read_text())
    assert committed == openapi_document(), "regenerate it: python -m assetflow.openapi > openapi.json"


def test_405_and_404_come_from_the_table() -> None:
    assert allowed_methods("/pipelines/etl/queue") == ["DELETE", "GET"]
    assert allowed_methods("/runs/r-1") == ["GET"]
    assert allowed_methods("/runs/r-1/nothing") == []


def test_a_bad_line_is_refused() -> None:
    with pytest.raises(RouteTableError, match="method"):
        Route("FETCH", "/x", "x", "read", "x")
    with pytest.raises(RouteTableError, match="permission"):
        Route("GET", "/x", "x", "admin", "x")  # type: ignore[arg-type]
    with pytest.raises(RouteTableError, match="path"):
        Route("GET", "x", "x", "read", "x")
    with pytest.raises(RouteTableError, match="query"):
        Route("GET", "/x", "x", "read", "x", query=("colour",))
    with pytest.raises(RouteTableError, match="twice"):
        check_table([*ROUTES, ROUTES[0]])
    with pytest.raises(RouteTableError, match="variable"):
        check_table([*ROUTES, Route("POST", "/runs/{id}/stop", "stopRun", "operate", "x")])
    with pytest.raises(KeyError, match=r"routes\.py"):
        by_operation("noSuchOperation")


def test_route_forms() -> None:
    route = by_operation("clearQueue")
    assert route.key == "DELETE /pipelines/{id}/queue"
    assert route.resolver_path == "/pipelines/<id>/queue"
    assert route.arn_path == "/pipelines/*/queue"
    assert route.pattern.match("/pipelines/a%2Fb/queue")
    assert not route.pattern.match("/pipelines/a/b/queue")
