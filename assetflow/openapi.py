"""``GET /openapi.json``: the OpenAPI 3 document generated from the route table (``assetflow/routes.py``).

The schemas below describe DESIGN §5's JSON shapes; each route's line in the table says which it takes and
answers. Regenerate the copy at the repository root with ``python -m assetflow.openapi > openapi.json``.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

from assetflow.routes import QUERY_PARAMETERS, ROUTES, Route

TITLE = "assetflow"
DESCRIPTION = (
    "Operator API of assetflow. IAM-authorised on AWS (SigV4; each route needs the read, emit or operate "
    "policy of the stack, see x-assetflow-permission); the local runtime takes the bearer token of "
    '.assetflow/dev.json. Errors are {"error": code, "detail": message}.'
)
_ERRORS = {
    400: "invalid input (the detail says what to fix)",
    404: "no such pipeline, run or asset",
    409: "the state kept changing; retry",
    413: "body over 4 MiB or extra over 10 MiB (without an extras store: body over 128 KiB or extra over 64 KiB)",
    422: "the Idempotency-Key was used for a different request",
    503: "the store is busy; retry (Retry-After)",
}
_QUERY_SCHEMAS: dict[str, dict[str, Any]] = {
    "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
}
# What one operation documents beyond its line in the table (headers of POST /assets/events).
_EXTRA: dict[str, dict[str, Any]] = {
    "createAssetEvent": {
        "parameters": [
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                "description": "a retry with the same key (per caller, for 15 days) returns the first event "
                "instead of creating another",
            }
        ],
        "response_headers": {
            "Idempotent-Replayed": {"schema": {"type": "string", "enum": ["true", "false"]}},
            "X-Assetflow-Warning": {
                "schema": {"type": "string"},
                "description": "set when the asset was new to assetflow (not in the catalog, no events)",
            },
        },
    },
}

_RUN_KEY = {
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "schema": {"type": "string", "minLength": 1, "maxLength": 255},
            "description": "a retry with the same key (per caller) returns the run the first request created",
        }
    ],
}
_EXTRA["triggerRun"] = _RUN_KEY
_EXTRA["replayRun"] = _RUN_KEY

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {
            "error": {
                "type": "string",
                "enum": [
                    "bad_request",
                    "not_found",
                    "method_not_allowed",
                    "conflict",
                    "payload_too_large",
                    "idempotency_key_reused",
                    "invalid_state",
                    "unavailable",
                    "internal_error",
                ],
            },
            "detail": {"type": "string"},
        },
    },
    "EmitRequest": {
        "type": "object",
        "required": ["uri"],
        "additionalProperties": False,
        "properties": {
            "uri": {"type": "string", "maxLength": 1500},
            "extra": {
                "type": "object",
                "nullable": True,
                "description": "up to 32 KiB of canonical JSON is stored "
                "inline; larger extras (up to 10 MiB) are "
                "stored in S3 and the event carries "
                '{"extra_ref": {"uri", "bytes", "sha256"}} '
                "instead; the key extra_ref is reserved; 32 "
                "levels deep at most",
            },
            "partition_key": {"type": "string", "minLength": 1, "maxLength": 256, "nullable": True},
            "version": {
                "type": "string",
                "minLength": 1,
                "maxLength": 256,
                "nullable": True,
                "description": "the data version the event stands for (an ETag, a snapshot id); "
                "skip_unchanged pipelines run once per version",
            },
        },
    },
    "AssetEvent": {
        "type": "object",
        "required": ["asset", "id", "timestamp", "extra", "source", "partition_key"],
        "properties": {
            "asset": {"type": "string"},
            "id": {"type": "string"},
            "timestamp": {"type": "string", "example": "2026-11-21T10:15:00.123456Z"},
            "extra": {"type": "object"},
            "source": {"type": "object", "description": "{type: watcher|run|api, ...}"},
            "partition_key": {"type": "string", "nullable": True},
            "version": {
                "type": "string",
                "description": "present only when the event carries a data version",
            },
        },
    },
    "Asset": {
        "type": "object",
        "required": ["uri", "name", "created_at", "last_event_at", "event_count", "health"],
        "properties": {
            "uri": {"type": "string"},
            "name": {"type": "string"},
            "created_at": {"type": "string", "nullable": True, "description": "null until its first event"},
            "last_event_at": {"type": "string", "nullable": True},
            "event_count": {"type": "integer"},
            "health": {"type": "string", "enum": ["fresh", "late", "check_failed", "quarantined_input"]},
            "declared": {"type": "boolean", "description": "whether the catalog declares it"},
        },
    },
    "TriggerRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "conf": {"type": "object", "nullable": True, "description": "the run's conf (a JSON object)"},
            "partition_key": {"type": "string", "minLength": 1, "maxLength": 256, "nullable": True},
        },
    },
    "CancelRequest": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "requeue": {
                "type": "boolean",
                "default": False,
                "description": "put the run's triggering events back in the queue (default: they are spent)",
            }
        },
    },
    "BackfillRequest": {
        "type": "object",
        "description": "start and end are required unless stale is true",
        "additionalProperties": False,
        "properties": {
            "stale": {
                "type": "boolean",
                "default": False,
                "description": "re-run the successful runs another code_version of the job made; "
                "start and end then bound when those were made",
            },
            "start": {"type": "string", "example": "2026-11-20T00:00:00Z"},
            "end": {
                "type": "string",
                "example": "2026-11-21T00:00:00Z",
                "description": "exclusive; not in the future",
            },
            "dry_run": {"type": "boolean", "default": False},
        },
    },
    "BackfillResult": {
        "type": "object",
        "required": ["pipeline", "start", "end", "dry_run", "runs", "created", "existing"],
        "properties": {
            "pipeline": {"type": "string"},
            "start": {"type": "string"},
            "end": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "events": {"type": "integer"},
            "ticks": {"type": "integer"},
            "runs": {"type": "array", "items": {"type": "object"}},
            "created": {"type": "integer"},
            "existing": {"type": "integer"},
            "skipped": {"type": "array", "items": {"type": "object"}},
        },
    },
    "PauseResult": {
        "type": "object",
        "required": ["pipeline", "paused", "changed"],
        "properties": {
            "pipeline": {"type": "string"},
            "paused": {"type": "boolean"},
            "changed": {"type": "boolean"},
            "runs": {"type": "array", "items": {"type": "string"}, "description": "runs unpausing started"},
        },
    },
    "Explain": {
        "type": "object",
        "required": ["pipeline", "due", "blocked_by", "missing", "updated", "required", "condition"],
        "properties": {
            "pipeline": {"type": "string"},
            "due": {"type": "boolean"},
            "blocked_by": {
                "type": "string",
                "nullable": True,
                "enum": ["assets", "max_active_runs", "debounce", "time", "paused"],
            },
            "missing": {"type": "array", "items": {"type": "string"}},
            "updated": {"type": "integer"},
            "required": {"type": "integer"},
            "condition": {
                "type": "object",
                "nullable": True,
                "description": 'the tree: {"op", "value", "children"}; leaves {"op", "value", "uri"|"name", "queued"}',
            },
            "paused": {"type": "boolean"},
            "queued": {"type": "integer"},
            "active_runs": {"type": "integer"},
            "max_active_runs": {"type": "integer", "nullable": True},
            "wake_at": {"type": "string", "nullable": True},
            "next_tick": {"type": "string", "nullable": True},
            "held_runs": {"type": "integer"},
            "late": {
                "type": "array",
                "description": "assets of the schedule that missed their expected arrival and are still late",
                "items": {
                    "type": "object",
                    "properties": {
                        "uri": {"type": "string"},
                        "deadline": {"type": "string"},
                        "partition_key": {"type": "string", "nullable": True},
                    },
                },
            },
        },
    },
    "ReleaseResult": {
        "type": "object",
        "required": ["event", "released", "queued_for", "runs"],
        "properties": {
            "event": {"$ref": "#/components/schemas/AssetEvent"},
            "released": {"type": "boolean", "description": "false when it was released before"},
            "queued_for": {"type": "array", "items": {"type": "string"}},
            "runs": {"type": "array", "items": {"type": "string"}},
        },
    },
    "QueueEntry": {
        "type": "object",
        "required": ["pipeline", "queue_key", "aliases", "event"],
        "properties": {
            "pipeline": {"type": "string"},
            "queue_key": {"type": "string", "nullable": True},
            "aliases": {"type": "array", "items": {"type": "string"}},
            "event": {"$ref": "#/components/schemas/AssetEvent"},
        },
    },
    "ClearResult": {
        "type": "object",
        "required": ["pipeline", "uri", "deleted"],
        "properties": {
            "pipeline": {"type": "string"},
            "uri": {"type": "string", "nullable": True},
            "deleted": {"type": "integer"},
        },
    },
    "Run": {
        "type": "object",
        "required": [
            "run_id",
            "pipeline",
            "state",
            "created_at",
            "partition_key",
            "job_run_id",
            "triggering_asset_events",
        ],
        "properties": {
            "run_id": {"type": "string"},
            "pipeline": {"type": "string"},
            "state": {"type": "string", "enum": ["queued", "running", "success", "failed", "cancelled"]},
            "created_at": {"type": "string"},
            "partition_key": {"type": "string", "nullable": True},
            "job_run_id": {"type": "string", "nullable": True},
            "scheduled_time": {"type": "string", "nullable": True},
            "triggered_by": {"type": "string", "enum": ["assets", "time", "manual", "replay", "backfill"]},
            "conf": {
                "type": "object",
                "nullable": True,
                "description": "the run's configuration (dag_run.conf)",
            },
            "replay_of": {"type": "string", "description": "the run a replay repeats (replays only)"},
            "code_version": {
                "type": "string",
                "description": "the job's code_version when the run was made (jobs that declare one)",
            },
            "rerun_of": {
                "type": "string",
                "description": "the run whose outputs a stale backfill makes again (backfill --stale only)",
            },
            "triggering_asset_events": {
                "type": "object",
                "additionalProperties": {
                    "type": "array",
                    "items": {"$ref": "#/components/schemas/AssetEvent"},
                },
                "description": "asset URI -> its events in (timestamp, id) order",
            },
        },
    },
    "RunDetail": {
        "allOf": [
            {"$ref": "#/components/schemas/Run"},
            {
                "type": "object",
                "required": ["produced_asset_events"],
                "properties": {
                    "produced_asset_events": {
                        "type": "object",
                        "additionalProperties": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/AssetEvent"},
                        },
                        "description": "asset URI -> events "
                        "the run's outlets "
                        "produced, in "
                        "(timestamp, id) "
                        "order",
                    }
                },
            },
        ]
    },
    "Quarantined": {
        "type": "object",
        "required": ["at", "watcher", "reason", "body", "facts", "identity"],
        "properties": {
            "at": {"type": "string"},
            "watcher": {"type": "string"},
            "reason": {"type": "string"},
            "body": {"type": "string"},
            "facts": {"type": "object"},
            "identity": {"type": "string"},
        },
    },
    "Catalog": {
        "type": "object",
        "required": ["format", "version", "assets", "aliases", "watchers", "pipelines"],
        "description": "the compiled definitions, as `assetflow catalog --json` prints them",
        "properties": {
            "format": {"type": "string"},
            "version": {"type": "integer"},
            "assets": {"type": "object"},
            "aliases": {"type": "object"},
            "watchers": {"type": "object"},
            "pipelines": {"type": "object"},
            "index": {"type": "object"},
        },
    },
}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _response_schema(response: str) -> dict[str, Any]:
    if response == "object":
        return {"type": "object"}
    if response.startswith("page:"):
        return {
            "type": "object",
            "required": ["items", "next"],
            "properties": {
                "items": {"type": "array", "items": _ref(response.removeprefix("page:"))},
                "next": {
                    "type": "string",
                    "nullable": True,
                    "description": "token of the next page; null on the last",
                },
            },
        }
    return _ref(response)


def _operation(route: Route) -> dict[str, Any]:
    extra = _EXTRA.get(route.operation, {})
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.variables
    ]
    for name in route.query:
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": name in route.required,
                "schema": _QUERY_SCHEMAS.get(name, {"type": "string"}),
                "description": QUERY_PARAMETERS[name],
            }
        )
    parameters += copy.deepcopy(extra.get("parameters", []))
    success: dict[str, Any] = {
        "description": route.summary,
        "content": {"application/json": {"schema": _response_schema(route.response)}},
    }
    if "response_headers" in extra:
        success["headers"] = copy.deepcopy(extra["response_headers"])
    responses: dict[str, Any] = {str(route.status): success}
    for status in sorted({400, 503, *route.errors}):
        responses[str(status)] = {
            "description": _ERRORS[status],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
    operation: dict[str, Any] = {
        "summary": route.summary,
        "operationId": route.operation,
        "x-assetflow-permission": route.permission,
    }
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
    operation["responses"] = responses
    return operation


def openapi_document(version: str = "1") -> dict[str, Any]:
    """The OpenAPI 3.0 document of every route in the table."""
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route)
    return {
        "openapi": "3.0.3",
        "info": {"title": TITLE, "version": version, "description": DESCRIPTION},
        "security": [{"sigv4": []}, {"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "sigv4": {
                    "type": "apiKey",
                    "name": "Authorization",
                    "in": "header",
                    "x-amazon-apigateway-authtype": "awsSigv4",
                },
                "bearer": {"type": "http", "scheme": "bearer"},
            },
            "schemas": copy.deepcopy(SCHEMAS),
        },
    }


if __name__ == "__main__":
    sys.stdout.write(json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n")
