"""The one table of HTTP API routes: the functions, API Gateway, the local runtime and the OpenAPI document use it.

Adding a route is one line here plus its handler in ``assetflow/functions/handle_api.py`` (decorated with
``@route("<operation>")``); API Gateway's route, its IAM permission, the 405 answers and ``GET /openapi.json``
follow from the line. ``tests/unit/test_routes.py`` fails when any of them disagree.

Pure on purpose: the Lambda functions, the CDK construct and the dev runtime all import it, and none of them
may import the others.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

#: What an operator is allowed: ``read`` the views, ``emit`` asset events, ``operate`` (change queues and
#: runs). On AWS each is an IAM managed policy allowing ``execute-api:Invoke`` on its routes only.
Permission = Literal["read", "emit", "operate"]
PERMISSIONS: tuple[Permission, ...] = ("read", "emit", "operate")
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})

#: Query parameters the routes accept; each route names the ones it takes (OpenAPI documents these).
QUERY_PARAMETERS: dict[str, str] = {
    "uri": "the asset's URI",
    "limit": "page size, 1 to 1000",
    "next": "the 'next' value of the previous page",
}

_VARIABLE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+|\{[A-Za-z_][A-Za-z0-9_]*\}")


class RouteTableError(ValueError):
    """A route line is malformed or conflicts with another one."""


@dataclass(frozen=True)
class Route:
    """One route: ``METHOD path``, its handler's operation, the permission that allows it, its OpenAPI facts.

    ``{name}`` in the path marks a variable. ``query`` lists the query parameters the route accepts
    (``required`` the ones it needs); ``body`` and
    ``response`` name schemas of ``assetflow/openapi.py`` (``response="page:Run"`` is a page of runs);
    ``errors`` are the statuses it may answer beyond 400 and 503.
    """

    method: str
    path: str
    operation: str
    permission: Permission
    summary: str
    query: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    body: str | None = None
    response: str = "object"
    status: int = 200
    errors: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise RouteTableError(f"{self.operation}: method {self.method!r} is not one of {sorted(METHODS)}")
        if not self.path.startswith("/") or any(not _SEGMENT.fullmatch(s) for s in self.path.split("/")[1:]):
            raise RouteTableError(f"{self.operation}: path {self.path!r} is not /segment/{{variable}}/...")
        if self.permission not in PERMISSIONS:
            raise RouteTableError(
                f"{self.operation}: permission {self.permission!r} is not one of {PERMISSIONS}"
            )
        unknown = set(self.query) - set(QUERY_PARAMETERS)
        if unknown or not set(self.required) <= set(self.query):
            raise RouteTableError(
                f"{self.operation}: query parameters {sorted(unknown)} unknown, or required not accepted"
            )

    @property
    def key(self) -> str:
        """API Gateway's route key: ``GET /runs/{run_id}``."""
        return f"{self.method} {self.path}"

    @property
    def variables(self) -> tuple[str, ...]:
        """The path variables, in order."""
        return tuple(_VARIABLE.findall(self.path))

    @property
    def resolver_path(self) -> str:
        """The path as Powertools' event handler writes it: ``/runs/<run_id>``."""
        return _VARIABLE.sub(r"<\1>", self.path)

    @property
    def arn_path(self) -> str:
        """The path in an ``execute-api`` ARN: each variable is a ``*`` wildcard."""
        return _VARIABLE.sub("*", self.path)

    @property
    def pattern(self) -> re.Pattern[str]:
        """A regular expression matching the request paths of this route."""
        parts = [re.escape(p) for p in _VARIABLE.split(self.path)]
        parts[1::2] = ["[^/]+"] * len(parts[1::2])
        return re.compile("^" + "".join(parts) + "$")


ROUTES: tuple[Route, ...] = (
    Route("POST", "/assets/events", "createAssetEvent", "emit", "Create an asset event", body="EmitRequest", response="AssetEvent", status=201, errors=(413, 422)),  # noqa: E501
    Route("GET", "/assets", "listAssets", "read", "Assets with last event time and event count", query=("limit", "next"), response="page:Asset"),  # noqa: E501
    Route("GET", "/assets/events", "listAssetEvents", "read", "An asset's events, newest first", query=("uri", "limit", "next"), required=("uri",), response="page:AssetEvent"),  # noqa: E501
    Route("GET", "/pipelines/{id}/queue", "listQueue", "read", "A pipeline's queued asset events", response="page:QueueEntry", errors=(404,)),  # noqa: E501
    Route("DELETE", "/pipelines/{id}/queue", "clearQueue", "operate", "Drop a pipeline's queued asset events", query=("uri",), response="ClearResult", errors=(404, 409)),  # noqa: E501
    Route("GET", "/pipelines/{id}/runs", "listPipelineRuns", "read", "A pipeline's runs, newest first", query=("limit", "next"), response="page:Run", errors=(404,)),  # noqa: E501
    Route("GET", "/runs", "listRuns", "read", "Every pipeline's runs, newest first", query=("limit", "next"), response="page:Run"),  # noqa: E501
    Route("GET", "/runs/{run_id}", "getRun", "read", "One run with its triggering and produced events", response="RunDetail", errors=(404,)),  # noqa: E501
    Route("GET", "/quarantine", "listQuarantine", "read", "Rejected messages, newest first", query=("limit", "next"), response="page:Quarantined"),  # noqa: E501
    Route("GET", "/catalog", "getCatalog", "read", "The compiled definitions (as `assetflow catalog --json`)", response="Catalog"),  # noqa: E501
    Route("GET", "/pipelines/{id}/explain", "explainPipeline", "read", "Why the pipeline runs or waits now: its condition tree, x of N, and one blocked_by reason", response="Explain", errors=(404,)),  # noqa: E501
    Route("POST", "/pipelines/{id}/runs", "triggerRun", "operate", "Trigger a manual run (waits queued for a slot under max_active_runs)", body="TriggerRequest", response="Run", status=201, errors=(404, 413, 422)),  # noqa: E501
    Route("POST", "/pipelines/{id}/pause", "pausePipeline", "operate", "Pause a pipeline: events keep queueing, no run starts", response="PauseResult", errors=(404,)),  # noqa: E501
    Route("POST", "/pipelines/{id}/unpause", "unpausePipeline", "operate", "Unpause a pipeline and evaluate it again", response="PauseResult", errors=(404,)),  # noqa: E501
    Route("POST", "/pipelines/{id}/backfill", "backfillPipeline", "operate", "The runs the schedule would have made from the stored events in [start, end)", body="BackfillRequest", response="BackfillResult", errors=(404,)),  # noqa: E501
    Route("POST", "/runs/{run_id}/cancel", "cancelRun", "operate", "Cancel a queued or running run (EMR CancelJobRun); frees its slot", body="CancelRequest", response="Run", errors=(404, 409)),  # noqa: E501
    Route("POST", "/runs/{run_id}/replay", "replayRun", "operate", "A new run with the same triggering events and conf", response="Run", status=201, errors=(404, 409, 422)),  # noqa: E501
    Route("POST", "/assets/events/{id}/release", "releaseAssetEvent", "operate", "Let an event held by a failed blocking check count again", response="ReleaseResult", errors=(404,)),  # noqa: E501
    Route("GET", "/openapi.json", "getOpenApi", "read", "This API's OpenAPI 3 document"),
)  # fmt: skip


def check_table(routes: Iterable[Route]) -> None:
    """Refuse a table with a repeated route key or operation, or sibling path variables named differently.

    API Gateway matches ``/runs/{run_id}`` and ``/runs/{id}/cancel`` as one path tree: a variable at the
    same place under the same prefix must carry the same name everywhere.

    Raises:
        RouteTableError: the first conflict found.
    """
    keys: set[str] = set()
    operations: set[str] = set()
    variable_at: dict[tuple[str, ...], str] = {}
    for route in routes:
        if route.key in keys or route.operation in operations:
            raise RouteTableError(f"{route.key} ({route.operation}) is in the table twice")
        keys.add(route.key)
        operations.add(route.operation)
        segments = route.path.split("/")[1:]
        for index, segment in enumerate(segments):
            if segment.startswith("{"):
                prefix = tuple(segments[:index])
                named = variable_at.setdefault(prefix, segment)
                if named != segment:
                    raise RouteTableError(
                        f"{route.key}: the variable after /{'/'.join(prefix)} is {named} in another route"
                    )


def by_operation(operation: str) -> Route:
    """The route of an operation.

    Raises:
        KeyError: no route has that operation.
    """
    for route in ROUTES:
        if route.operation == operation:
            return route
    raise KeyError(f"no route has the operation {operation!r}; add it to assetflow/routes.py")


def allowed_methods(path: str) -> list[str]:
    """The methods the table has for a request path (empty: no route has that path)."""
    return sorted({r.method for r in ROUTES if r.pattern.match(path)})


def of_permission(permission: Permission) -> tuple[Route, ...]:
    """The routes one permission allows."""
    return tuple(r for r in ROUTES if r.permission == permission)


check_table(ROUTES)
