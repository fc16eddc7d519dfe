//! The OpenAPI 3 document of every route under `/api/v1`, built from one table that the
//! router also uses, committed as `docs/openapi.json` (a test keeps the two equal) and served
//! at `/api/v1/openapi.json`.

use axum::extract::Query;
use axum::response::IntoResponse;
use serde_json::{json, Map, Value};

use crate::params::{ApiError, Params};

/// One route: path, summary, its parameters (name, where, required, type, description),
/// whether it can answer CSV, and where the route documents its JSON answer, that answer's
/// schema and a description of it.
#[derive(Debug)]
pub struct RouteDoc {
    pub path: &'static str,
    pub summary: &'static str,
    pub params: &'static [(&'static str, &'static str, bool, &'static str, &'static str)],
    pub csv: bool,
    pub answer: Option<fn() -> Value>,
    pub description: &'static str,
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
    "Items per page, a whole number from 1 to 1000 (default 100).",
);
const CURSOR: (&str, &str, bool, &str, &str) = (
    "cursor",
    "query",
    false,
    "string",
    "The `next_cursor` of the previous page, as it was handed out; anything else is a 400.",
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
        params: &[GROUP, ENVIRONMENT, LABEL, APP, ("depth", "query", false, "integer", "Deepest group level listed, a whole number from 0 to 16 (default 16: every level)."), FORMAT],
        csv: true,
        answer: None,
        description: "",
    },
    RouteDoc {
        path: "/api/v1/drift",
        summary: "(cluster, app) pairs with desired against actual version and revision, drift state, since when and the reconciler's message.",
        params: &[GROUP, ENVIRONMENT, LABEL, APP, ("state", "query", false, "string", "Drift states to list, repeatable or comma-separated (default every state but in_sync)."), LIMIT, CURSOR, FORMAT],
        csv: true,
        answer: None,
        description: "",
    },
    RouteDoc {
        path: "/api/v1/clusters/{id}",
        summary: "One cluster: every app desired and actual, last seen, and recent history.",
        params: &[("id", "path", true, "string", "The cluster id."), ("history_hours", "query", false, "number", "How far back the history reaches, up to 744 hours (default 24); 0 for none (then ClickHouse is not read). The page's `history` holds the newest 200 transitions of the cluster's objects within that time, newest first; `/api/v1/history?cluster=` reaches further back, with the render group's desired-state changes beside them.")],
        csv: false,
        answer: None,
        description: "",
    },
    RouteDoc {
        path: "/api/v1/apps/{app}/versions",
        summary: "An app's version inventory: desired and running versions with counts per group; with `version`, the clusters running it.",
        params: &[("app", "path", true, "string", "The app."), GROUP, ENVIRONMENT, LABEL, ("depth", "query", false, "integer", "Group level of the per-group counts, a whole number from 1 to 16 (default 1)."), ("version", "query", false, "string", "List the clusters running this version, a page at a time (`limit`, `cursor`)."), LIMIT, CURSOR, FORMAT],
        csv: true,
        answer: Some(versions_answer),
        description: "Counts are of the selected clusters (scope, `group`, `environment`, `label`): a cluster counts under the version desired for it and, separately, under the version it runs. With `format=csv`, one row per side, version and group: `side,version,group,clusters`, `side` being `desired` or `running`.",
    },
    RouteDoc {
        path: "/api/v1/stale",
        summary: "Clusters not heard from within the stale threshold, never seen first, then oldest first.",
        params: &[GROUP, ENVIRONMENT, LABEL, LIMIT, CURSOR, FORMAT],
        csv: true,
        answer: Some(stale_answer),
        description: "Paged like the other listings: `limit` items per page (1 to 1000, default 100), and while more follow, `next_cursor` to pass as `cursor` for the next page. Pages follow the listing's order (never seen first, then by last seen, then by cluster id) and never repeat a cluster; each page reads the fleet anew, so a cluster that reports again between two pages leaves the listing, and one that falls silent joins it at the end (it was seen last). With `format=csv`, the page's items as rows (`cluster,group,environment,last_seen,silent_seconds`); the cursor of the next page is only in the JSON answer.",
    },
    RouteDoc {
        path: "/api/v1/explain",
        summary: "Why an app is (or is not) desired on a cluster: policies, render group, commit.",
        params: &[("cluster", "query", true, "string", "The cluster id."), APP],
        csv: false,
        answer: Some(explain_answer),
        description: "The reasons are the cluster's own (from its reason set), the same list in the same order as `fleetscope render explain` gives for the commit the hub last loaded, even where the cluster shares its render group with clusters that other policies brought the same apps to.",
    },
    RouteDoc {
        path: "/api/v1/environments",
        summary: "Per app and environment, the desired and the running versions with cluster counts.",
        params: &[GROUP, LABEL, APP, FORMAT],
        csv: true,
        answer: None,
        description: "",
    },
    RouteDoc {
        path: "/api/v1/gate",
        summary: "Rollout gate: for an app version (or render commit) within a selection, the share of targeted clusters in sync and a pass/fail verdict at `threshold`.",
        params: &[("app", "query", true, "string", "The app."), ("version", "query", false, "string", "The version rolled out (give this or commit)."), ("commit", "query", false, "string", "The GitOps commit rolled out (give this or version)."), GROUP, ENVIRONMENT, LABEL, ("threshold", "query", false, "number", "Share in sync needed to pass, 0 to 1 (default 1).")],
        csv: false,
        answer: None,
        description: "",
    },
    RouteDoc {
        path: "/api/v1/history",
        summary: "History over a time range, newest first: for a cluster, the transitions of its app objects and the desired-state changes of its render group; otherwise the transitions within a group subtree and/or of one app, with the renders of the period (renders only for unscoped tokens).",
        params: &[("cluster", "query", false, "string", "One cluster (or give group and/or app)."), GROUP, APP, ("from", "query", false, "string", "Start: seconds since 1970 or RFC 3339 (default a day before `to`)."), ("to", "query", false, "string", "End (default now); the range spans at most 31 days."), LIMIT, FORMAT],
        csv: true,
        answer: None,
        description: "",
    },
    RouteDoc {
        path: "/api/v1/openapi.json",
        summary: "This document.",
        params: &[],
        csv: false,
        answer: None,
        description: "Takes no parameters: any is a 400 naming it, as on every route.",
    },
];

/// The JSON answer of `/api/v1/stale`.
fn stale_answer() -> Value {
    json!({
        "type": "object",
        "required": ["total", "items", "next_cursor"],
        "properties": {
            "total": { "type": "integer", "description": "Stale clusters in the selection, on every page." },
            "items": { "type": "array", "description": "At most `limit` clusters, never seen first, then oldest first.", "items": {
                "type": "object",
                "properties": {
                    "cluster": { "type": "string" },
                    "group": { "type": "string" },
                    "environment": { "type": "string" },
                    "last_seen": { "type": "string", "nullable": true, "description": "RFC 3339; null when never seen." },
                    "silent_seconds": { "type": "integer", "nullable": true, "description": "Seconds since last seen; null when never seen." },
                },
            } },
            "next_cursor": { "type": "string", "nullable": true, "description": "Pass as `cursor` for the next page; null on the last page." },
        },
    })
}

/// The JSON answer of `/api/v1/explain`.
fn explain_answer() -> Value {
    json!({
        "type": "object",
        "required": ["cluster", "group", "render_group", "apps"],
        "properties": {
            "cluster": { "type": "string" },
            "group": { "type": "string", "description": "The cluster's group path." },
            "render_group": { "type": "string", "nullable": true, "description": "Null when the cluster belongs to no render group (not rendered, or registered by the collector only)." },
            "apps": { "type": "array", "description": "Every app the cluster has, desired or running, by app name; with `app`, only that app (an entry with `desired: false` and an `explanation` when the cluster neither should nor does run it).", "items": {
                "type": "object",
                "required": ["app", "desired"],
                "properties": {
                    "app": { "type": "string" },
                    "desired": { "type": "boolean" },
                    "version": { "type": "string", "description": "Desired apps: the desired version." },
                    "reasons": { "type": "array", "items": { "type": "string" }, "description": "Desired apps: why, as `fleetscope render explain` says it (`policy/<name>` or `dependency of <app>`), in its order." },
                    "pinned_by": { "type": "string", "nullable": true, "description": "Desired apps: the policy (name without `policy/`) whose pin decided the version; null for the app's default version." },
                    "render_group": { "type": "string", "nullable": true },
                    "commit": { "type": "string", "description": "Desired apps: the GitOps commit that last changed this app's desired state." },
                    "render_id": { "type": "integer" },
                    "desired_since": { "type": "string", "description": "RFC 3339." },
                    "state": { "type": "string", "description": "The pair's drift state." },
                    "explanation": { "type": "string", "description": "Apps that are not desired: why not, in words." },
                },
            } },
        },
    })
}

/// The JSON answer of `/api/v1/apps/{app}/versions`.
fn versions_answer() -> Value {
    let by_version = |side: &str| {
        json!({ "type": "array", "description": format!("One entry per {side} version, by version."), "items": {
            "type": "object",
            "properties": {
                "version": { "type": "string" },
                "clusters": { "type": "integer", "description": format!("Clusters the version is {side} on.") },
                "groups": { "type": "object", "additionalProperties": { "type": "integer" }, "description": "Those clusters per group at `depth` (its first `depth` levels): group path to count; the counts add up to `clusters`." },
            },
        } })
    };
    json!({
        "type": "object",
        "required": ["app", "desired", "running", "clusters", "next_cursor"],
        "properties": {
            "app": { "type": "string" },
            "desired": by_version("desired"),
            "running": by_version("running"),
            "clusters": { "type": "array", "description": "With `version`: at most `limit` clusters running it, by cluster id, each as a drift item; otherwise empty.", "items": { "type": "object" } },
            "next_cursor": { "type": "string", "nullable": true, "description": "With `version`, while more clusters follow: pass as `cursor` for the next page; otherwise null." },
        },
    })
}

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
        let schema = route
            .answer
            .map_or_else(|| json!({ "type": "object" }), |answer| answer());
        let mut content = json!({ "application/json": { "schema": schema } });
        if route.csv {
            content["text/csv"] = json!({ "schema": { "type": "string" } });
        }
        // Every route refuses parameters it does not take, so every route can answer 400.
        let mut responses = json!({
            "200": { "description": "The answer.", "content": content },
            "400": { "$ref": "#/components/responses/BadRequest" },
            "401": { "$ref": "#/components/responses/Unauthorized" },
        });
        // Only a named cluster can be missing; an unknown app has an empty inventory.
        if route.path.contains("{id}") || route.params.iter().any(|p| p.0 == "cluster") {
            responses["404"] = json!({ "$ref": "#/components/responses/NotFound" });
        }
        // Every route has the server's deadline; the two that read ClickHouse also answer 503
        // when it does not answer.
        responses["503"] = json!({ "$ref": "#/components/responses/Unavailable" });
        let mut operation =
            json!({ "summary": route.summary, "parameters": parameters, "responses": responses });
        if !route.description.is_empty() {
            operation["description"] = json!(route.description);
        }
        paths.insert(route.path.to_owned(), json!({ "get": operation }));
    }
    let error = json!({ "type": "object", "required": ["error"], "properties": {
        "error": { "type": "string" }, "parameter": { "type": "string", "description": "The parameter at fault, for 400." } } });
    let response = |description: &str| json!({ "description": description, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } });
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Fleetscope hub API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Desired against actual state of a GitOps fleet: drift, version inventory, history, group rollups and rollout gates. Every route needs a bearer token (read role); scoped tokens see only their group subtree. Every route, this document's included, refuses a parameter it does not take, a repeated one that cannot repeat and a value that does not parse with a 400 whose `parameter` names it, and a path value that is not percent-encoded UTF-8 the same way. Integer parameters take decimal digits only: a sign, a fraction (`1.5`, `2.0`) or an exponent is refused. Listings that page (`drift`, `stale`, and `apps/{app}/versions` with `version`) take `limit` and `cursor` and answer `next_cursor`, null on the last page; a cursor is opaque: pass it back as it was handed out, since one that does not decode is a 400 naming `cursor`.",
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
                "Unavailable": response("ClickHouse did not answer, or the request was still unanswered at its 30 s deadline (with `Retry-After`)."),
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

/// `GET /api/v1/openapi.json`: takes no parameters, so any is refused like on every route.
pub async fn serve(
    Query(pairs): Query<Vec<(String, String)>>,
) -> Result<impl IntoResponse, ApiError> {
    Params::new(pairs, &[], &[])?;
    Ok(axum::Json(document()))
}

#[cfg(test)]
mod tests {
    /// `UPDATE_EXPECT=1 cargo test -p fleetscope-hub --lib openapi` rewrites the file.
    #[test]
    fn the_committed_document_is_current() {
        expect_test::expect_file!["../../docs/openapi.json"].assert_eq(&super::document_text());
    }
}
