//! The OpenAPI 3.1 document of every route under `/api/v1`, and the router of those routes,
//! both from one list: each handler's `#[utoipa::path]` (summary, parameters from its typed
//! query, answer types with their field documentation) goes into the document as its route
//! goes into the router, so the two cannot disagree. The document is committed as
//! `docs/openapi.json` (a test keeps the two equal) and served at `/api/v1/openapi.json`, the
//! one route that needs no token: it holds no fleet data, and clients read it before they
//! have one.

use std::sync::{Arc, OnceLock};

use axum::http::header;
use axum::response::IntoResponse;
use axum::Router;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::openapi::{OpenApi, Ref, RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::answers::ErrorBody;
use crate::api;
use crate::errors::error_components;
use crate::query::{ApiQuery, NoQuery};
use crate::state::AppState;

const DESCRIPTION: &str = "Desired against actual state of a GitOps fleet: drift, version inventory, history, group rollups and rollout gates.

Every route but this document needs a bearer token (read role): a token of the hub's token file or, when the file names an identity provider, a JWT it signed (an access token whose audience the file accepts, or an ID token of the hub's client); scoped callers see only their group subtree, on every route.

Every route, this document's included, refuses a parameter it does not take, a repeated one that cannot repeat (only parameters whose schema is an array repeat) and a value that does not parse with a 400 whose `parameter` names it, and a path value that is not percent-encoded UTF-8 the same way. Integer parameters take decimal digits only: a sign, a fraction (`1.5`, `2.0`) or an exponent is refused.

Listings that page (`drift`, `stale`, and `apps/{app}/versions` with `version`) take `limit` and `cursor` and answer `next_cursor`, null on the last page; a cursor is opaque: pass it back as it was handed out, since one that does not decode is a 400 naming `cursor`.

Times in answers are RFC 3339 in UTC; a time that is not known (a cluster never seen) is null. Every error has the `ErrorBody` shape.";

/// `GET /api/v1/openapi.json`: takes no parameters, so any is refused like on every route;
/// needs no token.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    summary = "This document.",
    description = "Needs no token: the document holds no fleet data. Takes no parameters: any is a 400 naming it, as on every route.",
    params(NoQuery),
    responses((status = 200, description = "The OpenAPI 3.1 document.", content_type = "application/json", body = Object)),
)]
pub async fn serve(ApiQuery(NoQuery): ApiQuery<NoQuery>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        document_text(),
    )
}

/// The routes of `/api/v1` and their document, from the same handlers.
pub struct Routes {
    /// Every route that needs a token: the router puts authentication on these.
    pub guarded: Router<Arc<AppState>>,
    /// The routes open to anyone: the document's own.
    pub open: Router<Arc<AppState>>,
    /// The document of both, the open routes' operations marked as needing no token.
    pub document: OpenApi,
}

impl std::fmt::Debug for Routes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routes")
            .field("paths", &self.document.paths.paths.keys())
            .finish_non_exhaustive()
    }
}

/// The routes of `/api/v1` and their document, from the same handlers.
pub fn routes() -> Routes {
    let (guarded, mut document) = OpenApiRouter::new()
        .routes(routes!(api::summary))
        .routes(routes!(api::drift))
        .routes(routes!(api::cluster))
        .routes(routes!(api::versions))
        .routes(routes!(api::stale))
        .routes(routes!(api::explain))
        .routes(routes!(api::environments))
        .routes(routes!(api::gate))
        .routes(routes!(api::history))
        .routes(routes!(api::insights_failures))
        .routes(routes!(api::rollouts))
        .routes(routes!(api::rollout))
        .routes(routes!(api::delivery))
        .split_for_parts();
    let (open, open_document) = OpenApiRouter::new()
        .routes(routes!(serve))
        .split_for_parts();
    let open_paths: Vec<String> = open_document.paths.paths.keys().cloned().collect();
    document.merge(open_document);
    complete(&mut document, &open_paths);
    Routes {
        guarded,
        open,
        document,
    }
}

/// What every operation shares, put in once: the errors every route can answer (every route
/// refuses parameters it does not take, so every route can answer 400; every route has the
/// server's deadline, so every route can answer 503; every route but `open_paths` needs a
/// token, so those can answer 401, and 403 to a JWT whose groups give no role), authentication (none for `open_paths`), and the document's
/// information.
fn complete(document: &mut OpenApi, open_paths: &[String]) {
    document.info.title = "Fleetscope hub API".to_owned();
    document.info.version = env!("CARGO_PKG_VERSION").to_owned();
    document.info.description = Some(DESCRIPTION.to_owned());
    document.info.license = None;
    document.info.contact = None;
    let components = document.components.get_or_insert_with(Default::default);
    components.schemas.insert(
        ErrorBody::name().into_owned(),
        <ErrorBody as PartialSchema>::schema(),
    );
    for (name, response) in error_components() {
        components.responses.insert(name.to_owned(), response);
    }
    components.security_schemes.insert(
        "bearer".to_owned(),
        RefOr::T(SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer))),
    );
    document.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new(
        "bearer",
        Vec::<String>::new(),
    )]);
    for (name, schema) in components.schemas.iter_mut() {
        require_every_property(name, schema);
    }
    let examples = crate::examples::examples();
    for (path, item) in document.paths.paths.iter_mut() {
        let Some(operation) = item.get.as_mut() else {
            continue;
        };
        if let Some((_, example)) = examples.iter().find(|(p, _)| p == path) {
            if let Some(RefOr::T(ok)) = operation.responses.responses.get_mut("200") {
                if let Some(RefOr::T(json)) = ok.content.get_mut("application/json") {
                    json.example = Some(example.clone());
                }
            }
        }
        let open = open_paths.contains(path);
        if open {
            // An empty list of requirements: this operation needs no token.
            operation.security = Some(Vec::new());
        }
        for (status, name) in [
            ("400", "BadRequest"),
            ("401", "Unauthorized"),
            ("403", "Forbidden"),
            ("503", "Unavailable"),
        ] {
            if open && (status == "401" || status == "403") {
                continue;
            }
            operation
                .responses
                .responses
                .entry(status.to_owned())
                .or_insert_with(|| Ref::new(format!("#/components/responses/{name}")).into());
        }
    }
}

/// Properties an answer leaves out where they do not apply (`skip_serializing_if`); every other
/// property of every answer is always sent, null where its schema allows. The schema test
/// validates real answers with these rules, so a property missing here fails it.
const LEFT_OUT_WHEN_EMPTY: &[(&str, &str)] = &[
    ("GroupCounts", "group"),
    ("GroupCounts", "depth"),
    ("ErrorBody", "parameter"),
    ("NotDesiredApp", "state"),
    ("HistoryEvent", "cluster"),
];

/// The document.
pub fn document() -> &'static OpenApi {
    static DOCUMENT: OnceLock<OpenApi> = OnceLock::new();
    DOCUMENT.get_or_init(|| routes().document)
}

/// Marks every property of an answer's object schema (and of the objects of its `oneOf`)
/// required, but for [`LEFT_OUT_WHEN_EMPTY`]: an `Option` field is sent as null, not left out,
/// and clients should be able to rely on it being there.
fn require_every_property(name: &str, schema: &mut RefOr<Schema>) {
    match schema {
        RefOr::T(Schema::OneOf(one_of)) => {
            for variant in &mut one_of.items {
                require_every_property(name, variant);
            }
        }
        RefOr::T(Schema::Object(object)) => {
            // The tag of an internally tagged enum (`HistoryEvent`'s `type`) has no field to
            // carry documentation.
            if let Some(RefOr::T(Schema::Object(tag))) = object.properties.get_mut("type") {
                if tag.description.is_none() {
                    if let Some([value]) = tag.enum_values.as_deref() {
                        tag.description = Some(format!("Which kind this is: always {value} here."));
                    }
                }
            }
            object.required = object
                .properties
                .keys()
                .filter(|property| !LEFT_OUT_WHEN_EMPTY.contains(&(name, property.as_str())))
                .cloned()
                .collect();
        }
        _ => {}
    }
}

/// The document as committed, pretty-printed with a final newline.
pub fn document_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let mut text = document()
            .to_pretty_json()
            .expect("the document serializes");
        text.push('\n');
        text
    })
}

#[cfg(test)]
mod tests {
    /// Every property of every answer says what it means, and every parameter too: the
    /// document is what clients are written from.
    #[test]
    fn every_field_and_parameter_is_described() {
        fn walk(at: &str, schema: &serde_json::Value, missing: &mut Vec<String>) {
            for variant in schema["oneOf"].as_array().into_iter().flatten() {
                walk(at, variant, missing);
            }
            for (name, property) in schema["properties"].as_object().into_iter().flatten() {
                // An optional reference carries its description on the reference.
                let described = |p: &serde_json::Value| {
                    p["description"].as_str().is_some_and(|d| !d.is_empty())
                };
                let nullable_ref = property["oneOf"].as_array().into_iter().flatten();
                if !described(property) && !nullable_ref.clone().any(described) {
                    missing.push(format!("{at}.{name}"));
                }
            }
        }
        let document = serde_json::to_value(super::document()).unwrap();
        let mut missing = Vec::new();
        for (name, schema) in document["components"]["schemas"].as_object().unwrap() {
            walk(name, schema, &mut missing);
        }
        for (path, item) in document["paths"].as_object().unwrap() {
            for parameter in item["get"]["parameters"].as_array().into_iter().flatten() {
                if parameter["description"].as_str().is_none_or(str::is_empty) {
                    missing.push(format!("{path} {}", parameter["name"]));
                }
            }
        }
        assert!(missing.is_empty(), "not described: {missing:#?}");
    }

    /// `UPDATE_EXPECT=1 cargo test -p fleetscope-hub --lib openapi` rewrites the file.
    #[test]
    fn the_committed_document_is_current() {
        expect_test::expect_file!["../../docs/openapi.json"].assert_eq(super::document_text());
    }
}
