//! The reference of a sample document that uses what the hub's does not, and refusals of bad
//! documents and examples.

use expect_test::expect;
use serde_json::json;

use super::*;

/// A document that uses what the hub's does not (yet): defaults, enums, a request body,
/// per-operation security with roles, an open operation, shared parameters, named schemas.
fn sample() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Sample", "version": "2.0.0" },
        "servers": [{ "url": "https://hub.example" }],
        "security": [{ "bearer": [] }],
        "paths": {
            "/things/{id}": {
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" }, "example": "t-1" }],
                "get": {
                    "summary": "One thing.",
                    "parameters": [
                        { "name": "format", "in": "query", "schema": { "type": "string", "enum": ["json", "csv"], "default": "json" } },
                        { "name": "limit", "in": "query", "description": "Items | per page.", "schema": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 100 } }
                    ],
                    "responses": {
                        "200": { "description": "The thing.", "content": {
                            "application/json": { "schema": { "$ref": "#/components/schemas/Thing" } },
                            "text/csv": { "schema": { "type": "string" } } } },
                        "404": { "$ref": "#/components/responses/NotFound" }
                    }
                },
                "put": {
                    "summary": "Replace a thing.",
                    "security": [{ "bearer": ["admin"] }],
                    "requestBody": { "required": true, "content": { "application/json": { "schema": {
                        "type": "object", "required": ["name"],
                        "properties": { "name": { "type": "string" }, "tags": { "type": "array", "items": { "type": "string" } } } } } } },
                    "responses": { "204": { "description": "Replaced." }, "default": { "description": "An error." } }
                }
            },
            "/ping": { "get": { "summary": "Liveness.", "security": [], "responses": { "200": { "description": "ok" } } } }
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "responses": { "NotFound": { "description": "No such thing.", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } } },
            "schemas": {
                "Error": { "type": "object", "required": ["error"], "properties": { "error": { "type": "string" } } },
                "Thing": { "type": "object", "properties": { "id": { "type": "string" }, "size": { "type": ["integer", "null"], "description": "In bytes." },
                    "parts": { "type": "array", "items": { "type": "object", "properties": { "name": { "type": "string" } } } } } }
            }
        }
    })
}

#[test]
fn a_full_document_becomes_a_reference() {
    expect![[r#"
        <!-- Generated from the hub's OpenAPI document by tools/api-reference: do not edit.
             Refresh with `UPDATE_DOCS=1 cargo test -p fleetscope-api-reference --test api_reference`. -->

        # Sample

        Version 2.0.0.

        This page is generated from [openapi.json](openapi.json), which the hub builds from the same handlers as its router. The examples expect two shell variables: `HUB`, the hub's base URL (for example `https://hub.example`), and `TOKEN`, a token from the hub's token file (see [hub.md](hub.md#tokens-and-scopes) and [operations.md](operations.md)). Names in the examples come from the example platform repo (`examples/platform`); values in angle brackets are placeholders. Health, readiness and metrics endpoints are not part of this API; [operations.md](operations.md) describes them.

        ## Authentication

        | scheme | how to send it |
        |---|---|
        | `bearer` | HTTP header `Authorization: Bearer <token>` |

        By default every operation needs a `bearer` token (any role). Each operation below says what it needs. Roles are `read` and `admin` (admin may do everything read may); a token can also be limited to a group subtree, and then sees nothing outside it on any operation. Without a valid token the answer is 401.

        ## Index

        | method | path | summary |
        |---|---|---|
        | GET | [`/ping`](#get-ping) | Liveness. |
        | GET | [`/things/{id}`](#get-things-id) | One thing. |
        | PUT | [`/things/{id}`](#put-things-id) | Replace a thing. |

        ## Operations

        <a id="get-ping"></a>

        ### GET `/ping`

        Liveness.

        **Authentication**: none.

        **Parameters**: none.

        **Request body**: none.

        **Responses**

        | status | meaning | content |
        |---|---|---|
        | 200 | ok | — |

        **Example**

        ```sh
        curl -sS "$HUB/ping"
        ```

        <a id="get-things-id"></a>

        ### GET `/things/{id}`

        One thing.

        **Authentication**: a `bearer` token (any role).

        **Parameters**

        | name | in | type | required | default | allowed values | description |
        |---|---|---|---|---|---|---|
        | `id` | path | string | yes | — | — |  |
        | `format` | query | string | no | `json` | `json`, `csv` |  |
        | `limit` | query | integer | no | `100` | 1 to 1000 | Items \| per page. |

        **Request body**: none.

        **Responses**

        | status | meaning | content |
        |---|---|---|
        | 200 | The thing. | `application/json`: [`Thing`](#schema-thing); `text/csv`: string |
        | 404 | No such thing. | `application/json`: [`Error`](#schema-error) |

        **Example**

        ```sh
        curl -sS -H "Authorization: Bearer $TOKEN" "$HUB/things/t-1"
        curl -sS -H "Authorization: Bearer $TOKEN" "$HUB/things/t-1?format=csv"
        ```

        <a id="put-things-id"></a>

        ### PUT `/things/{id}`

        Replace a thing.

        **Authentication**: a `bearer` token with role `admin`.

        **Parameters**

        | name | in | type | required | description |
        |---|---|---|---|---|
        | `id` | path | string | yes |  |

        **Request body** (required)

        - `application/json`: object
          - `name`: string, required
          - `tags`: array of string

        **Responses**

        | status | meaning | content |
        |---|---|---|
        | 204 | Replaced. | — |
        | default | An error. | — |

        **Example**

        ```sh
        curl -sS -X PUT -H "Authorization: Bearer $TOKEN" -H "Content-Type: application/json" --data @body.json "$HUB/things/t-1"
        ```

        ## Shared definitions

        ### Responses

        | name | meaning | content |
        |---|---|---|
        | `NotFound` | No such thing. | `application/json`: [`Error`](#schema-error) |

        ### Schemas

        <a id="schema-error"></a>

        #### `Error`

        object

        - `error`: string, required

        <a id="schema-thing"></a>

        #### `Thing`

        object

        - `id`: string
        - `parts`: array of object
          - `name`: string
        - `size`: integer or null. In bytes.
    "#]]
    .assert_eq(&markdown(&sample(), &[]).unwrap());
}

#[test]
fn broken_documents_are_refused_with_the_place() {
    let check = |document: Value, expected: &str| {
        assert_eq!(markdown(&document, &[]).unwrap_err().to_string(), expected);
    };
    check(
        json!({ "swagger": "2.0" }),
        "openapi document: /openapi: missing; expected an OpenAPI 3 document",
    );
    check(
        json!({ "openapi": "3.0.3" }),
        "openapi document: /paths: missing or not an object",
    );
    check(
        json!({ "openapi": "3.0.3", "paths": {} }),
        "openapi document: /paths: no operations",
    );
    let mut dangling = sample();
    dangling["paths"]["/ping"]["get"]["responses"]["200"] =
        json!({ "$ref": "#/components/responses/Gone" });
    check(
        dangling,
        "openapi document: /paths/~1ping/get/responses/200: \"#/components/responses/Gone\" does not resolve",
    );
}

#[test]
fn examples_replace_the_made_up_one_and_must_fit_the_operation() {
    const GOOD: &[Example] = &[Example {
        method: "get",
        path: "/things/{id}",
        requests: &["/things/t-2?limit=5", "/things/t-3?format=csv"],
        note: Some("`T` is a thing."),
    }];
    let reference = markdown(&sample(), GOOD).unwrap();
    let section = reference.split("### GET `/things/{id}`").nth(1).unwrap();
    let example = section
        .split("```sh\n")
        .nth(1)
        .unwrap()
        .split("\n<a id")
        .next()
        .unwrap();
    assert_eq!(
        example,
        "curl -sS -H \"Authorization: Bearer $TOKEN\" \"$HUB/things/t-2?limit=5\"\n\
         curl -sS -H \"Authorization: Bearer $TOKEN\" \"$HUB/things/t-3?format=csv\"\n\
         ```\n\n`T` is a thing.\n"
    );
    let refused = |example: Example| markdown(&sample(), &[example]).unwrap_err().to_string();
    assert_eq!(
        refused(Example { method: "get", path: "/gone", requests: &[], note: None }),
        "openapi document: /paths/~1gone/get: an example names an operation the document does not have"
    );
    assert_eq!(
        refused(Example { method: "get", path: "/things/{id}", requests: &["/things?limit=5"], note: None }),
        "openapi document: /paths/~1things~1{id}/get: example \"/things?limit=5\" does not fit the path"
    );
    assert_eq!(
        refused(Example { method: "get", path: "/things/{id}", requests: &["/things/t-1?size=5"], note: None }),
        "openapi document: /paths/~1things~1{id}/get: example \"/things/t-1?size=5\": the operation takes no query parameter \"size\""
    );
}
