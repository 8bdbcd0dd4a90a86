"""The HTTP API Lambda: DESIGN §5's routes (API Gateway HTTP API, payload v2) over the operator views."""

from __future__ import annotations

import base64
import binascii
import urllib.parse
import uuid
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, TypeVar, cast

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError as RouteNotFoundError
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from assetflow.adapters.extras import S3ExtrasStore
from assetflow.composition import Dependencies, dependencies, utc_now
from assetflow.core import limits
from assetflow.core.errors import ConflictError, NotFoundError, StoreUnavailableError
from assetflow.openapi import openapi_document
from assetflow.routes import ROUTES, allowed_methods, by_operation
from assetflow.usecases import operate, requests, views

logger = Logger(service="assetflow-api")
app = APIGatewayHttpResolver()

ANONYMOUS = "anonymous"
#: Header that tells a client its asset event was accepted with a warning (an asset new to assetflow).
WARNING_HEADER = "X-Assetflow-Warning"
#: Header set on a replayed ``Idempotency-Key`` (the name Stripe and the IETF draft's examples use).
REPLAYED_HEADER = "Idempotent-Replayed"


def error_response(
    status: int, code: str, detail: Any, headers: dict[str, str] | None = None
) -> Response[Any]:
    """The JSON error shape of every 4xx and 5xx: ``{"error": code, "detail": ...}``."""
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body={"error": code, "detail": detail},
        headers=headers,
    )


# ---- request helpers -----------------------------------------------------------------------------------


def _deps() -> Dependencies:
    return app.context["deps"]  # type: ignore[no-any-return]


def _extras() -> S3ExtrasStore | None:
    # Injected dependencies without an extras store (a composition from before it) keep the inline limits.
    return getattr(_deps(), "extras", None)


def _request_context() -> dict[str, Any]:
    context = app.current_event.raw_event.get("requestContext")
    return context if isinstance(context, dict) else {}


def principal() -> str:
    """The caller: the IAM authorizer's user ARN (API Gateway authenticates), else ``anonymous``."""
    authorizer = _request_context().get("authorizer") or {}
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    arn = iam.get("userArn") if isinstance(iam, dict) else None
    return arn if isinstance(arn, str) and arn else ANONYMOUS


def _request_id() -> str:
    request_id = _request_context().get("requestId")
    return request_id if isinstance(request_id, str) and request_id else uuid.uuid4().hex


def query(allowed: frozenset[str]) -> dict[str, str]:
    """The query parameters, each at most once and all among ``allowed``.

    ``rawQueryString`` is parsed when present: ``queryStringParameters`` joins repeated parameters with
    commas, which would be ambiguous for URIs that contain commas.

    Raises:
        RequestError: an unknown or repeated parameter.
    """
    raw = app.current_event.raw_event.get("rawQueryString")
    pairs: list[tuple[str, str]]
    if raw:
        pairs = urllib.parse.parse_qsl(raw, keep_blank_values=True)
    else:
        pairs = list((app.current_event.raw_event.get("queryStringParameters") or {}).items())
    found: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            accepted = ", ".join(sorted(allowed)) or "none"
            raise requests.RequestError(f"unknown query parameter {name!r} (accepted: {accepted})")
        if name in found:
            raise requests.RequestError(f"query parameter {name!r} is given more than once")
        found[name] = value
    return found


def body(limit: int = limits.MAX_REQUEST_BODY_BYTES) -> bytes | str:
    """The request body (base64-decoded when API Gateway encoded it), refused early when over ``limit``.

    Raises:
        PayloadTooLargeError: the body is over ``limit`` bytes.
        RequestError: an undecodable base64 body.
    """
    text = app.current_event.body or ""
    if not app.current_event.is_base64_encoded:
        return text
    if len(text) > (limit // 3 + 1) * 4:
        raise requests.PayloadTooLargeError(f"the body is over the limit of {limit} bytes")
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise requests.RequestError("the body is marked base64 but does not decode") from exc


def _page_args(params: dict[str, str]) -> dict[str, Any]:
    return {"limit": params.get("limit"), "token": params.get("next") or None}


# ---- routes --------------------------------------------------------------------------------------------

Params = dict[str, str]
_Handler = Callable[..., Any]
_HANDLED: set[str] = set()


def route(operation: str) -> Callable[[_Handler], _Handler]:
    """Serve ``operation``'s line of the route table (``assetflow/routes.py``) with the decorated function.

    The function receives the checked query parameters, then the URL-decoded path variables in order.
    """
    line = by_operation(operation)

    def register(func: _Handler) -> _Handler:
        def serve(**variables: str) -> Any:
            params = query(frozenset(line.query))
            return func(params, *(urllib.parse.unquote(variables[name]) for name in line.variables))

        app.route(line.resolver_path, method=line.method)(serve)
        _HANDLED.add(operation)
        return func

    return register


@route("createAssetEvent")
def post_asset_event(params: Params) -> Response[Any]:
    """Create an asset event: 201 with the event (the same event again for a replayed Idempotency-Key)."""
    extras = _extras()
    limit = limits.MAX_REQUEST_BODY_BYTES if extras is None else limits.MAX_REQUEST_BODY_BYTES_BY_REFERENCE
    request = requests.parse_emit_request(
        requests.parse_body(body(limit), limit=limit), by_reference=extras is not None
    )
    key = app.current_event.headers.get("idempotency-key")
    deps = _deps()
    result = requests.emit_event(
        deps.store,
        deps.catalog,
        request,
        principal=principal(),
        request_id=_request_id(),
        now=utc_now(),
        idempotency_key=key,
        extras=extras,
    )
    headers: dict[str, str] = {}
    if result.warning:
        logger.warning("asset event for an unknown asset", extra={"asset": result.event.asset})
        headers[WARNING_HEADER] = result.warning
    if key is not None:
        headers[REPLAYED_HEADER] = "false" if result.created else "true"
    logger.info(
        "asset event created" if result.created else "asset event replayed",
        extra={"event_id": result.event.id, "asset": result.event.asset, "principal": principal()},
    )
    return Response(
        status_code=HTTPStatus.CREATED,
        content_type=content_types.APPLICATION_JSON,
        body=result.event.to_json(),
        headers=headers,
    )


@route("listAssets")
def get_assets(params: Params) -> dict[str, Any]:
    """Assets with their last event time and event count."""
    deps = _deps()
    return views.list_assets(deps.store, catalog=deps.catalog, now=utc_now(), **_page_args(params))


@route("listAssetEvents")
def get_asset_events(params: Params) -> dict[str, Any]:
    """An asset's events, newest first (``uri`` required)."""
    return views.list_events(_deps().store, params.get("uri"), **_page_args(params))


@route("listQueue")
def get_queue(params: Params, pipeline_id: str) -> dict[str, Any]:
    """A pipeline's queued events."""
    deps = _deps()
    return views.list_queue(deps.store, deps.catalog, pipeline_id, now=utc_now())


@route("clearQueue")
def delete_queue(params: Params, pipeline_id: str) -> dict[str, Any]:
    """Drop a pipeline's queued events (of one asset with ``?uri=``); says how many were dropped."""
    deps = _deps()
    result = requests.clear_queue(deps.store, deps.catalog, pipeline_id, uri=params.get("uri"))
    logger.info("queue cleared", extra={**result, "principal": principal()})
    return result


@route("listPipelineRuns")
def get_pipeline_runs(params: Params, pipeline_id: str) -> dict[str, Any]:
    """A pipeline's runs, newest first."""
    deps = _deps()
    return views.list_runs(deps.store, deps.catalog, pipeline_id, **_page_args(params))


@route("listRuns")
def get_runs(params: Params) -> dict[str, Any]:
    """Every pipeline's runs, newest first."""
    return views.list_runs(_deps().store, None, None, **_page_args(params))


@route("getRun")
def get_run(params: Params, run_id: str) -> dict[str, Any]:
    """One run with its triggering events and the events it produced."""
    return views.show_run(_deps().store, run_id, _deps().catalog)


@route("listQuarantine")
def get_quarantine(params: Params) -> dict[str, Any]:
    """Rejected messages with their reasons, newest first."""
    return views.list_quarantine(_deps().store, **_page_args(params))


@route("explainPipeline")
def get_explain(params: Params, pipeline_id: str) -> dict[str, Any]:
    """Why the pipeline runs or waits now (the evaluator's own decision)."""
    deps = _deps()
    return views.explain(deps.store, deps.catalog, pipeline_id, now=utc_now(), extras=deps.extras)


def _optional_body() -> object:
    raw = body()
    return requests.parse_body(raw) if raw.strip() else None


def _created(run: Any, created: bool) -> Response[Any]:
    return Response(
        status_code=HTTPStatus.CREATED,
        content_type=content_types.APPLICATION_JSON,
        body=run.to_json(),
        headers={REPLAYED_HEADER: "false" if created else "true"},
    )


@route("triggerRun")
def post_run(params: Params, pipeline_id: str) -> Response[Any]:
    """Trigger a manual run: 201 with the run (queued, or already submitted when a slot was free)."""
    request = operate.parse_trigger_request(_optional_body())
    result = _deps().operations.trigger(
        pipeline_id,
        request,
        principal=principal(),
        request_id=_request_id(),
        idempotency_key=app.current_event.headers.get("idempotency-key"),
    )
    return _created(result.run, result.created)


@route("pausePipeline")
def post_pause(params: Params, pipeline_id: str) -> dict[str, Any]:
    """Pause a pipeline."""
    return _deps().operations.pause(pipeline_id, principal=principal())


@route("unpausePipeline")
def post_unpause(params: Params, pipeline_id: str) -> dict[str, Any]:
    """Unpause a pipeline; held runs and due queues start."""
    return _deps().operations.unpause(pipeline_id, principal=principal())


@route("backfillPipeline")
def post_backfill(params: Params, pipeline_id: str) -> dict[str, Any]:
    """Create (or with dry_run only plan) the runs of a past window."""
    doc = requests.parse_body(body())
    stale = operate.parse_stale_backfill_request(doc)
    if stale is not None:  # {"stale": true}: re-run what an older code version produced
        since, until, dry = stale
        return _deps().operations.backfill_stale(
            pipeline_id, start=since, end=until, dry_run=dry, principal=principal()
        )
    start, end, dry_run = operate.parse_backfill_request(doc)
    result = _deps().operations.backfill(pipeline_id, start, end, dry_run=dry_run, principal=principal())
    return result.to_json()


@route("cancelRun")
def post_cancel(params: Params, run_id: str) -> dict[str, Any]:
    """Cancel a queued or running run."""
    requeue = operate.parse_cancel_request(_optional_body())
    return _deps().operations.cancel(run_id, requeue=requeue, principal=principal()).to_json()


@route("replayRun")
def post_replay(params: Params, run_id: str) -> Response[Any]:
    """Replay a run: 201 with the new run."""
    result = _deps().operations.replay(
        run_id,
        principal=principal(),
        request_id=_request_id(),
        idempotency_key=app.current_event.headers.get("idempotency-key"),
    )
    return _created(result.run, result.created)


@route("releaseAssetEvent")
def post_release(params: Params, event_id: str) -> dict[str, Any]:
    """Release an event held by a failed blocking check: it counts for downstream conditions from now on."""
    from assetflow.usecases.checks import release_event

    deps = _deps()
    return release_event(
        releases=deps.store,
        route=deps.evaluator.handle_batch,
        event_id=event_id,
        principal=principal(),
        now=utc_now(),
    ).to_json()


@route("getCatalog")
def get_catalog(params: Params) -> dict[str, Any]:
    """The compiled definitions the functions run with (``assetflow catalog --json``)."""
    return _deps().catalog.to_document()


@route("getOpenApi")
def get_openapi(params: Params) -> dict[str, Any]:
    """This API's OpenAPI document, generated from the route table."""
    return openapi_document()


_UNSERVED = sorted({r.operation for r in ROUTES} - _HANDLED)
if _UNSERVED:  # a line added to the table without its handler fails at import, in every test
    raise RuntimeError(f"routes without a handler in handle_api: {', '.join(_UNSERVED)}")


# ---- errors --------------------------------------------------------------------------------------------

_E = TypeVar("_E", bound=Exception)
_ErrorHandler = Callable[[_E], Response[Any]]


def _handles(kind: type[_E]) -> Callable[[_ErrorHandler[_E]], _ErrorHandler[_E]]:
    """Register an error handler with the resolver (Powertools' decorator, typed)."""
    return cast(Callable[[_ErrorHandler[_E]], _ErrorHandler[_E]], app.exception_handler(kind))


@app.not_found
def unknown_route(_: RouteNotFoundError) -> Response[Any]:
    """404 for an unknown path, 405 (with ``Allow``) for a known path with another method."""
    method = app.current_event.http_method.upper()
    path = app.current_event.path
    allowed = allowed_methods(path)
    if allowed and method not in allowed:
        return error_response(
            HTTPStatus.METHOD_NOT_ALLOWED,
            "method_not_allowed",
            f"{method} is not allowed on {path}; allowed: {', '.join(allowed)}",
            headers={"Allow": ", ".join(allowed)},
        )
    return error_response(HTTPStatus.NOT_FOUND, "not_found", f"no route {method} {path}")


@_handles(requests.ViewError)
def view_error(exc: requests.ViewError) -> Response[Any]:
    """Refused requests: 400, 413 or 422 with the reason."""
    return error_response(exc.status, exc.code, str(exc))


@_handles(NotFoundError)
def not_found(exc: NotFoundError) -> Response[Any]:
    """An unknown pipeline, run or asset."""
    return error_response(HTTPStatus.NOT_FOUND, "not_found", str(exc))


@_handles(ConflictError)
def conflict(exc: ConflictError) -> Response[Any]:
    """The state kept changing under concurrent writers; the client may retry."""
    return error_response(HTTPStatus.CONFLICT, "conflict", str(exc))


@_handles(StoreUnavailableError)
def unavailable(exc: StoreUnavailableError) -> Response[Any]:
    """The store throttled or failed: 503, retry later."""
    logger.warning("store unavailable", extra={"error": str(exc)})
    return error_response(
        HTTPStatus.SERVICE_UNAVAILABLE,
        "unavailable",
        "the store is busy; retry shortly",
        {"Retry-After": "1"},
    )


@_handles(Exception)
def internal_error(exc: Exception) -> Response[Any]:
    """Anything else: logged with its traceback, answered without internals."""
    logger.exception("unhandled error")
    return error_response(
        HTTPStatus.INTERNAL_SERVER_ERROR, "internal_error", f"unexpected error (request {_request_id()})"
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, deps: Dependencies | None = None
) -> dict[str, Any]:
    """Route one HTTP API (payload v2) request; errors come back as JSON responses, never as exceptions."""
    app.append_context(deps=deps or dependencies())  # type: ignore[no-untyped-call]
    return app.resolve(event, context)
