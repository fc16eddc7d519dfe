//! The OpenAPI 3 document of every route under `/api/v1`, built from one table that the
//! router also uses, committed as `docs/openapi.json` (a test keeps the two equal) and served
//! at `/api/v1/openapi.json`.

use axum::response::IntoResponse;
use serde_json::{json, Map, Value};

/// One route: path, summary, its parameters (name, where, required, type, description), and
/// whether it can answer CSV.
#[derive(Debug)]
pub struct RouteDoc {
    pub path: &'static str,
    pub summary: &'static str,
    pub params: &'static [(&'static str, &'static str, bool, &'static str, &'static str)],
    pub csv: bool,
}

const GROUP: (&str, &str, bool, &str, &str) = (
    "group",
    "query",
    false,
    "string",
    "Only clusters within this group subtree (`emea/de`).",
);
const ENVIRONMENT: (&str, &str, bool, &str, &str) = (
    "environment",
    "query",
    false,
    "string",
    "Only clusters of this environment.",
);
const LABEL: (&str, &str, bool, &str, &str) = (
    "label",
    "query",
    false,
    "string",
    "`key=value` a cluster's labels must have; repeatable, all must match.",
);
const APP: (&str, &str, bool, &str, &str) = ("app", "query", false, "string", "Only this app.");
const LIMIT: (&str, &str, bool, &str, &str) = (
    "limit",
    "query",
    false,
    "integer",
    "Items per page, 1 to 1000 (default 100).",
);
const CURSOR: (&str, &str, bool, &str, &str) = (
    "cursor",
    "query",
    false,
    "string",
    "The `next_cursor` of the previous page.",
);
const FORMAT: (&str, &str, bool, &str, &str) = (
    "format",
    "query",
    false,
    "string",
    "`json` (default) or `csv`.",
);

/// Every route under `/api/v1`.
pub const ROUTES: &[RouteDoc] = &[
    RouteDoc {
        path: "/api/v1/summary",
        summary: "The fleet and every group at every level: clusters total, reporting and stale; app instances per drift state. With `group` (or a scoped token), `total` is that subtree and the rows are that group and the groups below it.",
        params: &[GROUP, ENVIRONMENT, LABEL, APP, ("depth", "query", false, "integer", "Deepest group level listed (default all)."), FORMAT],
        csv: true,
    },
    RouteDoc {
        path: "/api/v1/drift",
        summary: "(cluster, app) pairs with desired against actual version and revision, drift state, since when and the reconciler's message.",
        params: &[GROUP, ENVIRONMENT, LABEL, APP, ("state", "query", false, "string", "Drift states to list, repeatable or comma-separated (default every state but in_sync)."), LIMIT, CURSOR, FORMAT],
        csv: true,
    },
    RouteDoc {
        path: "/api/v1/clusters/{id}",
        summary: "One cluster: every app desired and actual, last seen, and recent history.",
        params: &[("id", "path", true, "string", "The cluster id."), ("history_hours", "query", false, "number", "How far back the history reaches, up to 744 hours (default 24).")],
        csv: false,
    },
    RouteDoc {
        path: "/api/v1/apps/{app}/versions",
        summary: "An app's version inventory: desired and running versions with counts per group; with `version`, the clusters running it.",
        params: &[("app", "path", true, "string", "The app."), GROUP, ENVIRONMENT, LABEL, ("depth", "query", false, "integer", "Group level of the per-group counts (default 1)."), ("version", "query", false, "string", "List the clusters running this version."), LIMIT, CURSOR, FORMAT],
        csv: true,
    },
    RouteDoc {
        path: "/api/v1/stale",
        summary: "Clusters not heard from within the stale threshold, never seen first, then oldest first.",
        params: &[GROUP, ENVIRONMENT, LABEL, LIMIT, FORMAT],
        csv: true,
    },
    RouteDoc {
        path: "/api/v1/explain",
        summary: "Why an app is (or is not) desired on a cluster: policies, render group, commit.",
        params: &[("cluster", "query", true, "string", "The cluster id."), APP],
        csv: false,
    },
    RouteDoc {
        path: "/api/v1/environments",
        summary: "Per app and environment, the desired and the running versions with cluster counts.",
        params: &[GROUP, LABEL, APP, FORMAT],
        csv: true,
    },
    RouteDoc {
        path: "/api/v1/gate",
        summary: "Rollout gate: for an app version (or render commit) within a selection, the share of targeted clusters in sync and a pass/fail verdict at `threshold`.",
        params: &[("app", "query", true, "string", "The app."), ("version", "query", false, "string", "The version rolled out (give this or commit)."), ("commit", "query", false, "string", "The GitOps commit rolled out (give this or version)."), GROUP, ENVIRONMENT, LABEL, ("threshold", "query", false, "number", "Share in sync needed to pass, 0 to 1 (default 1).")],
        csv: false,
    },
    RouteDoc {
        path: "/api/v1/history",
        summary: "History over a time range, newest first: for a cluster, the transitions of its app objects and the desired-state changes of its render group; otherwise the transitions within a group subtree and/or of one app, with the renders of the period (renders only for unscoped tokens).",
        params: &[("cluster", "query", false, "string", "One cluster (or give group and/or app)."), GROUP, APP, ("from", "query", false, "string", "Start: seconds since 1970 or RFC 3339 (default a day before `to`)."), ("to", "query", false, "string", "End (default now); the range spans at most 31 days."), LIMIT, FORMAT],
        csv: true,
    },
    RouteDoc {
        path: "/api/v1/openapi.json",
        summary: "This document.",
        params: &[],
        csv: false,
    },
];

/// The document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for route in ROUTES {
        let parameters: Vec<Value> = route
            .params
            .iter()
            .map(|(name, place, required, kind, description)| {
                json!({ "name": name, "in": place, "required": required, "description": description, "schema": { "type": kind } })
            })
            .collect();
        let mut content = json!({ "application/json": { "schema": { "type": "object" } } });
        if route.csv {
            content["text/csv"] = json!({ "schema": { "type": "string" } });
        }
        let mut responses = json!({
            "200": { "description": "The answer.", "content": content },
            "401": { "$ref": "#/components/responses/Unauthorized" },
        });
        if !route.params.is_empty() {
            responses["400"] = json!({ "$ref": "#/components/responses/BadRequest" });
        }
        // Only a named cluster can be missing; an unknown app has an empty inventory.
        if route.path.contains("{id}") || route.params.iter().any(|p| p.0 == "cluster") {
            responses["404"] = json!({ "$ref": "#/components/responses/NotFound" });
        }
        if route.path == "/api/v1/clusters/{id}" || route.path == "/api/v1/history" {
            responses["503"] = json!({ "$ref": "#/components/responses/Unavailable" });
        }
        paths.insert(
            route.path.to_owned(),
            json!({ "get": { "summary": route.summary, "parameters": parameters, "responses": responses } }),
        );
    }
    let error = json!({ "type": "object", "required": ["error"], "properties": {
        "error": { "type": "string" }, "parameter": { "type": "string", "description": "The parameter at fault, for 400." } } });
    let response = |description: &str| json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } });
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Fleetscope hub API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Desired against actual state of a GitOps fleet: drift, version inventory, history, group rollups and rollout gates. Every route needs a bearer token (read role); scoped tokens see only their group subtree.",
        },
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": { "Error": error },
            "responses": {
                "BadRequest": response("A parameter is unknown, repeated or invalid; `parameter` names it."),
                "Unauthorized": response("No valid bearer token."),
                "NotFound": response("No such cluster within the caller's scope."),
                "Unavailable": response("ClickHouse did not answer."),
            },
        },
    })
}

/// The document as committed, pretty-printed with a final newline.
pub fn document_text() -> String {
    let mut text = serde_json::to_string_pretty(&document()).expect("json serializes");
    text.push('\n');
    text
}

pub async fn serve() -> impl IntoResponse {
    axum::Json(document())
}

#[cfg(test)]
mod tests {
    /// `UPDATE_EXPECT=1 cargo test -p fleetscope-hub --lib openapi` rewrites the file.
    #[test]
    fn the_committed_document_is_current() {
        expect_test::expect_file!["../../docs/openapi.json"].assert_eq(&super::document_text());
    }
}
