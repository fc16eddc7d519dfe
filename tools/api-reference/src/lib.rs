//! The API reference, `docs/api.md`, generated from the hub's OpenAPI document
//! (`fleetscope_hub::openapi::document`): every path and method with its summary, parameters,
//! request body, responses, authentication and an example `curl`. Nothing in the reference is
//! written by hand except the few sentences that explain how to read it;
//! `tests/api_reference.rs` fails when the committed file differs from what this crate makes of
//! the current document.
//!
//! A development tool: no shipped binary links it (the hub only makes the document).
//!
//! The module reads any OpenAPI 3 document (parameters with defaults and enums, request bodies,
//! `$ref`s into `components`, per-operation security), not only the parts the hub's document
//! uses today, so the reference grows with the document.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// The command that rewrites `docs/api.md` from the current document.
pub const REFRESH_COMMAND: &str =
    "UPDATE_DOCS=1 cargo test -p fleetscope-api-reference --test api_reference";

/// The HTTP methods of a path item, in the order the reference lists them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Why a document could not be turned into a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("openapi document: {at}: {message}")]
pub struct ReferenceError {
    /// Where in the document, as a JSON pointer.
    pub at: String,
    pub message: String,
}

fn malformed(at: &str, message: impl Into<String>) -> ReferenceError {
    ReferenceError {
        at: at.to_owned(),
        message: message.into(),
    }
}

/// Example requests of one operation: its method, its path as the document writes it, and
/// requests (path with values, and query) that show it in use. The document has no examples
/// of its own; these use the names of the example platform repo (`examples/platform`), and
/// [`markdown`] refuses any that names a parameter the operation does not take.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    pub method: &'static str,
    pub path: &'static str,
    pub requests: &'static [&'static str],
    /// A sentence shown under the requests (what a shell variable in them stands for).
    pub note: Option<&'static str>,
}

/// The hub's example requests. Operations without an entry get one made from the document:
/// required parameters only, placeholders where the document gives no value.
pub const EXAMPLES: &[Example] = &[
    Example {
        method: "get",
        path: "/api/v1/summary",
        requests: &[
            "/api/v1/summary?depth=2",
            "/api/v1/summary?group=emea/de&app=checkout&format=csv",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/drift",
        requests: &[
            "/api/v1/drift?group=emea/de&state=failed,out_of_sync",
            "/api/v1/drift?app=checkout&state=failed&format=csv&limit=1000",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/clusters/{id}",
        requests: &[
            "/api/v1/clusters/berlin-01",
            "/api/v1/clusters/berlin-01?history_hours=168",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/apps/{app}/versions",
        requests: &[
            "/api/v1/apps/checkout/versions?depth=2",
            "/api/v1/apps/checkout/versions?version=1.4.0&format=csv",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/stale",
        requests: &[
            "/api/v1/stale?group=emea",
            "/api/v1/stale?format=csv&limit=1000",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/explain",
        requests: &[
            "/api/v1/explain?cluster=lab-01",
            "/api/v1/explain?cluster=lab-01&app=checkout",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/environments",
        requests: &[
            "/api/v1/environments?app=checkout",
            "/api/v1/environments?group=emea&format=csv",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/gate",
        requests: &[
            "/api/v1/gate?app=checkout&version=1.4.0&group=emea&threshold=0.95",
            "/api/v1/gate?app=checkout&commit=$COMMIT",
            "/api/v1/gate?app=checkout&version=1.4.0&soak=2h&max_failed=0.02&stale=exclude&limit=20",
        ],
        note: Some(
            "`COMMIT` is a commit of the GitOps output repository, for example \
             `COMMIT=$(git -C /path/to/gitops rev-parse HEAD)`.",
        ),
    },
    Example {
        method: "get",
        path: "/api/v1/history",
        requests: &[
            "/api/v1/history?cluster=berlin-01&app=checkout",
            "/api/v1/history?group=emea/de&from=2026-11-01T00:00:00Z&to=2026-11-08T00:00:00Z&format=csv",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/insights/failures",
        requests: &[
            "/api/v1/insights/failures?app=checkout",
            "/api/v1/insights/failures?app=checkout&version=1.4.0&group=emea&limit=5",
        ],
        note: None,
    },
];

/// The reference of `document` as Markdown, with `examples` for the operations they name.
pub fn markdown(document: &Value, examples: &[Example]) -> Result<String, ReferenceError> {
    let reference = Reference::new(document)?;
    for example in examples {
        reference.check_example(example)?;
    }
    reference.render(examples)
}

/// One operation: a method on a path.
struct Operation<'a> {
    path: &'a str,
    method: &'a str,
    /// The path item, for parameters shared by its operations.
    item: &'a Map<String, Value>,
    operation: &'a Map<String, Value>,
}

impl Operation<'_> {
    fn anchor(&self) -> String {
        let mut anchor = self.method.to_owned();
        for c in self.path.chars() {
            if c.is_ascii_alphanumeric() {
                anchor.push(c.to_ascii_lowercase());
            } else if !anchor.ends_with('-') {
                anchor.push('-');
            }
        }
        anchor.trim_end_matches('-').to_owned()
    }

    fn pointer(&self) -> String {
        format!("/paths/{}/{}", escape_pointer(self.path), self.method)
    }
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

struct Reference<'a> {
    document: &'a Value,
    operations: Vec<Operation<'a>>,
}

impl<'a> Reference<'a> {
    fn new(document: &'a Value) -> Result<Reference<'a>, ReferenceError> {
        let version = document
            .get("openapi")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("/openapi", "missing; expected an OpenAPI 3 document"))?;
        if !version.starts_with("3.") {
            return Err(malformed(
                "/openapi",
                format!("{version:?} is not an OpenAPI 3 version"),
            ));
        }
        let paths = document
            .get("paths")
            .and_then(Value::as_object)
            .ok_or_else(|| malformed("/paths", "missing or not an object"))?;
        let mut operations = Vec::new();
        for (path, item) in paths {
            let item = item.as_object().ok_or_else(|| {
                malformed(&format!("/paths/{}", escape_pointer(path)), "not an object")
            })?;
            for method in METHODS {
                if let Some(operation) = item.get(method) {
                    let operation = operation.as_object().ok_or_else(|| {
                        malformed(
                            &format!("/paths/{}/{method}", escape_pointer(path)),
                            "not an object",
                        )
                    })?;
                    operations.push(Operation {
                        path,
                        method,
                        item,
                        operation,
                    });
                }
            }
        }
        if operations.is_empty() {
            return Err(malformed("/paths", "no operations"));
        }
        Ok(Reference {
            document,
            operations,
        })
    }

    /// Follows a `$ref` (local references only) until a value that is not one.
    fn resolve(&self, value: &'a Value, at: &str) -> Result<&'a Value, ReferenceError> {
        let mut value = value;
        for _ in 0..16 {
            let Some(reference) = value.get("$ref").and_then(Value::as_str) else {
                return Ok(value);
            };
            let pointer = reference.strip_prefix('#').ok_or_else(|| {
                malformed(
                    at,
                    format!("{reference:?} is not a reference into this document"),
                )
            })?;
            value = self
                .document
                .pointer(pointer)
                .ok_or_else(|| malformed(at, format!("{reference:?} does not resolve")))?;
        }
        Err(malformed(at, "references nest more than 16 deep"))
    }

    /// Refuses an example of an operation the document does not have, or one whose requests do
    /// not fit the path or name a parameter the operation does not take.
    fn check_example(&self, example: &Example) -> Result<(), ReferenceError> {
        let at = format!("/paths/{}/{}", escape_pointer(example.path), example.method);
        let operation = self
            .operations
            .iter()
            .find(|o| o.path == example.path && o.method == example.method)
            .ok_or_else(|| {
                malformed(
                    &at,
                    "an example names an operation the document does not have",
                )
            })?;
        let parameters = self.parameters(operation)?;
        let takes = |name: &str, place: &str| {
            parameters.iter().any(|p| {
                p.get("name").and_then(Value::as_str) == Some(name)
                    && p.get("in").and_then(Value::as_str) == Some(place)
            })
        };
        for request in example.requests {
            let (path, query) = request.split_once('?').unwrap_or((request, ""));
            let template: Vec<&str> = example.path.split('/').collect();
            let given: Vec<&str> = path.split('/').collect();
            let fits = template.len() == given.len()
                && template.iter().zip(&given).all(|(t, g)| {
                    match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                        Some(name) => takes(name, "path") && !g.is_empty(),
                        None => t == g,
                    }
                });
            if !fits {
                return Err(malformed(
                    &at,
                    format!("example {request:?} does not fit the path"),
                ));
            }
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let name = pair.split_once('=').map_or(pair, |(name, _)| name);
                if !takes(name, "query") {
                    return Err(malformed(
                        &at,
                        format!(
                            "example {request:?}: the operation takes no query parameter {name:?}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn render(&self, examples: &[Example]) -> Result<String, ReferenceError> {
        let mut out = String::new();
        let info = self.document.get("info");
        let text = |key: &str| {
            info.and_then(|i| i.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let title = match text("title") {
            "" => "API reference",
            title => title,
        };
        writeln!(
            out,
            "<!-- Generated from the hub's OpenAPI document by tools/api-reference: do not edit.\n     Refresh with `{REFRESH_COMMAND}`. -->\n"
        )
        .unwrap();
        writeln!(out, "# {title}\n").unwrap();
        if !text("version").is_empty() {
            writeln!(out, "Version {}.\n", text("version")).unwrap();
        }
        if !text("description").is_empty() {
            writeln!(out, "{}\n", text("description")).unwrap();
        }
        let base = self
            .document
            .pointer("/servers/0/url")
            .and_then(Value::as_str)
            .unwrap_or("http://127.0.0.1:8080");
        writeln!(
            out,
            "This page is generated from [openapi.json](openapi.json), which the hub builds from \
             the same handlers as its router. The examples expect two shell variables: `HUB`, the hub's \
             base URL (for example `{base}`), and `TOKEN`, a token from the hub's token file \
             (see [hub.md](hub.md#tokens-and-scopes) and [operations.md](operations.md)). \
             Names in the examples come from the example platform repo (`examples/platform`); \
             values in angle brackets are placeholders. Health, readiness and metrics endpoints \
             are not part of this API; [operations.md](operations.md) describes them.\n"
        )
        .unwrap();
        self.render_authentication(&mut out)?;
        self.render_index(&mut out);
        writeln!(out, "## Operations\n").unwrap();
        for operation in &self.operations {
            let example = examples
                .iter()
                .find(|e| e.path == operation.path && e.method == operation.method);
            self.render_operation(&mut out, operation, example)?;
        }
        self.render_components(&mut out)?;
        while out.ends_with("\n\n") {
            out.pop();
        }
        Ok(out)
    }

    fn render_authentication(&self, out: &mut String) -> Result<(), ReferenceError> {
        writeln!(out, "## Authentication\n").unwrap();
        let schemes = self
            .document
            .pointer("/components/securitySchemes")
            .and_then(Value::as_object);
        match schemes {
            Some(schemes) if !schemes.is_empty() => {
                writeln!(out, "| scheme | how to send it |\n|---|---|").unwrap();
                for (name, scheme) in schemes {
                    let at = format!("/components/securitySchemes/{}", escape_pointer(name));
                    let scheme = self.resolve(scheme, &at)?;
                    writeln!(out, "| `{name}` | {} |", cell(&scheme_text(scheme))).unwrap();
                }
                out.push('\n');
            }
            _ => writeln!(out, "The document declares no security schemes.\n").unwrap(),
        }
        let global = self.document.get("security");
        writeln!(
            out,
            "{} Each operation below says what it needs. Roles are `read` and `admin` (admin \
             may do everything read may); a token can also be limited to a group subtree, and \
             then sees nothing outside it on any operation. Without a valid token the answer \
             is 401.\n",
            match requirement_text(global) {
                None => "By default operations need no authentication.".to_owned(),
                Some(text) => format!("By default every operation needs {text}."),
            }
        )
        .unwrap();
        Ok(())
    }

    fn render_index(&self, out: &mut String) {
        writeln!(
            out,
            "## Index\n\n| method | path | summary |\n|---|---|---|"
        )
        .unwrap();
        for operation in &self.operations {
            let summary = operation
                .operation
                .get("summary")
                .and_then(Value::as_str)
                .unwrap_or_default();
            writeln!(
                out,
                "| {} | [`{}`](#{}) | {} |",
                operation.method.to_ascii_uppercase(),
                operation.path,
                operation.anchor(),
                cell(summary)
            )
            .unwrap();
        }
        out.push('\n');
    }

    /// The operation's parameters: the path item's, overridden by the operation's own.
    fn parameters(
        &self,
        operation: &Operation<'a>,
    ) -> Result<Vec<&'a Map<String, Value>>, ReferenceError> {
        let mut parameters: Vec<&'a Map<String, Value>> = Vec::new();
        let lists = [
            (
                operation.item.get("parameters"),
                format!("/paths/{}/parameters", escape_pointer(operation.path)),
            ),
            (
                operation.operation.get("parameters"),
                format!("{}/parameters", operation.pointer()),
            ),
        ];
        for (list, at) in lists {
            let Some(list) = list else { continue };
            let list = list
                .as_array()
                .ok_or_else(|| malformed(&at, "not an array"))?;
            for (index, parameter) in list.iter().enumerate() {
                let at = format!("{at}/{index}");
                let parameter = self
                    .resolve(parameter, &at)?
                    .as_object()
                    .ok_or_else(|| malformed(&at, "not an object"))?;
                let key = |p: &Map<String, Value>| {
                    (
                        p.get("name").and_then(Value::as_str).map(str::to_owned),
                        p.get("in").and_then(Value::as_str).map(str::to_owned),
                    )
                };
                if key(parameter).0.is_none() {
                    return Err(malformed(&at, "a parameter without a name"));
                }
                parameters.retain(|p| key(p) != key(parameter));
                parameters.push(parameter);
            }
        }
        Ok(parameters)
    }

    fn render_operation(
        &self,
        out: &mut String,
        operation: &Operation<'a>,
        example: Option<&Example>,
    ) -> Result<(), ReferenceError> {
        let at = operation.pointer();
        let get = |key: &str| {
            operation
                .operation
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        writeln!(
            out,
            "<a id=\"{}\"></a>\n\n### {} `{}`\n",
            operation.anchor(),
            operation.method.to_ascii_uppercase(),
            operation.path
        )
        .unwrap();
        if operation.operation.get("deprecated") == Some(&Value::Bool(true)) {
            writeln!(out, "**Deprecated.**\n").unwrap();
        }
        for text in [get("summary"), get("description")] {
            if !text.is_empty() {
                writeln!(out, "{text}\n").unwrap();
            }
        }
        let security = operation
            .operation
            .get("security")
            .or_else(|| self.document.get("security"));
        writeln!(
            out,
            "**Authentication**: {}.\n",
            requirement_text(security).unwrap_or_else(|| "none".to_owned())
        )
        .unwrap();

        let parameters = self.parameters(operation)?;
        if parameters.is_empty() {
            writeln!(out, "**Parameters**: none.\n").unwrap();
        } else {
            self.render_parameters(out, &parameters, &at)?;
        }
        self.render_request_body(out, operation, &at)?;
        self.render_responses(out, operation, &at)?;
        self.render_examples(out, operation, &parameters, security, example)?;
        Ok(())
    }

    fn render_parameters(
        &self,
        out: &mut String,
        parameters: &[&'a Map<String, Value>],
        at: &str,
    ) -> Result<(), ReferenceError> {
        // Columns for defaults, allowed values and limits only where the document gives some,
        // so that an empty column never suggests there are none.
        let schemas: Vec<Option<&Value>> = parameters
            .iter()
            .map(|p| {
                p.get("schema")
                    .map(|s| self.resolve(s, &format!("{at}/parameters")))
                    .transpose()
            })
            .collect::<Result<_, _>>()?;
        let defaults: Vec<String> = schemas.iter().map(|s| default_text(*s)).collect();
        let allowed: Vec<String> = schemas
            .iter()
            .map(|s| self.allowed_text(*s))
            .collect::<Result<_, _>>()?;
        let with_defaults = defaults.iter().any(|d| !d.is_empty());
        let with_allowed = allowed.iter().any(|a| !a.is_empty());
        let mut header = vec!["name", "in", "type", "required"];
        if with_defaults {
            header.push("default");
        }
        if with_allowed {
            header.push("allowed values");
        }
        header.push("description");
        writeln!(
            out,
            "**Parameters**\n\n| {} |\n|{}",
            header.join(" | "),
            "---|".repeat(header.len())
        )
        .unwrap();
        for (index, parameter) in parameters.iter().enumerate() {
            let text = |key: &str| {
                parameter
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let required = parameter.get("required") == Some(&Value::Bool(true));
            let mut row = vec![
                format!("`{}`", text("name")),
                text("in").to_owned(),
                match schemas[index] {
                    Some(schema) => self.type_text(schema, at)?,
                    None => "—".to_owned(),
                },
                if required { "yes" } else { "no" }.to_owned(),
            ];
            if with_defaults {
                row.push(or_dash(&defaults[index]));
            }
            if with_allowed {
                row.push(or_dash(&allowed[index]));
            }
            let mut description = text("description").to_owned();
            if parameter.get("deprecated") == Some(&Value::Bool(true)) {
                description.insert_str(0, "Deprecated. ");
            }
            row.push(cell(&description));
            writeln!(out, "| {} |", row.join(" | ")).unwrap();
        }
        out.push('\n');
        Ok(())
    }

    fn render_request_body(
        &self,
        out: &mut String,
        operation: &Operation<'a>,
        at: &str,
    ) -> Result<(), ReferenceError> {
        let Some(body) = operation.operation.get("requestBody") else {
            writeln!(out, "**Request body**: none.\n").unwrap();
            return Ok(());
        };
        let at = format!("{at}/requestBody");
        let body = self.resolve(body, &at)?;
        let required = body.get("required") == Some(&Value::Bool(true));
        write!(
            out,
            "**Request body** ({})",
            if required { "required" } else { "optional" }
        )
        .unwrap();
        match body.get("description").and_then(Value::as_str) {
            Some(description) => writeln!(out, ": {description}\n").unwrap(),
            None => writeln!(out, "\n").unwrap(),
        }
        self.render_content(out, body.get("content"), &at)?;
        Ok(())
    }

    /// Each media type of a `content` map with the outline of its schema.
    fn render_content(
        &self,
        out: &mut String,
        content: Option<&'a Value>,
        at: &str,
    ) -> Result<(), ReferenceError> {
        let Some(content) = content.and_then(Value::as_object) else {
            return Ok(());
        };
        for (media_type, media) in content {
            let schema = media.get("schema");
            match schema {
                Some(schema) => {
                    let resolved = self.resolve(schema, at)?;
                    writeln!(out, "- `{media_type}`: {}", self.type_text(schema, at)?).unwrap();
                    if schema.get("$ref").is_none() {
                        self.outline(out, resolved, 1, at)?;
                    }
                }
                None => writeln!(out, "- `{media_type}`").unwrap(),
            }
        }
        out.push('\n');
        Ok(())
    }

    fn render_responses(
        &self,
        out: &mut String,
        operation: &Operation<'a>,
        at: &str,
    ) -> Result<(), ReferenceError> {
        let at = format!("{at}/responses");
        let Some(responses) = operation
            .operation
            .get("responses")
            .and_then(Value::as_object)
        else {
            return Err(malformed(&at, "missing or not an object"));
        };
        writeln!(
            out,
            "**Responses**\n\n| status | meaning | content |\n|---|---|---|"
        )
        .unwrap();
        let mut outlines = String::new();
        let mut statuses: Vec<&String> = responses.keys().collect();
        // Numeric codes in order, then ranges such as `4XX`, then `default`.
        statuses.sort_by_key(|s| (s.as_str() == "default", s.to_ascii_uppercase()));
        for status in statuses {
            let at = format!("{at}/{}", escape_pointer(status));
            let declared = &responses[status.as_str()];
            let response = self.resolve(declared, &at)?;
            let description = response
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut content = Vec::new();
            if let Some(media) = response.get("content").and_then(Value::as_object) {
                for (media_type, media) in media {
                    match media.get("schema") {
                        Some(schema) => {
                            content
                                .push(format!("`{media_type}`: {}", self.type_text(schema, &at)?));
                            let resolved = self.resolve(schema, &at)?;
                            if schema.get("$ref").is_none() && has_structure(resolved) {
                                writeln!(outlines, "Status {status}, `{media_type}`:\n").unwrap();
                                self.outline(&mut outlines, resolved, 0, &at)?;
                                outlines.push('\n');
                            }
                        }
                        None => content.push(format!("`{media_type}`")),
                    }
                }
            }
            let headers = response
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| {
                    h.keys()
                        .map(|name| format!("header `{name}`"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            content.extend(headers);
            writeln!(
                out,
                "| {status} | {} | {} |",
                cell(description),
                if content.is_empty() {
                    "—".to_owned()
                } else {
                    content.join("; ")
                }
            )
            .unwrap();
        }
        out.push('\n');
        out.push_str(&outlines);
        Ok(())
    }

    fn render_examples(
        &self,
        out: &mut String,
        operation: &Operation<'a>,
        parameters: &[&'a Map<String, Value>],
        security: Option<&Value>,
        example: Option<&Example>,
    ) -> Result<(), ReferenceError> {
        let mut path = operation.path.to_owned();
        let mut query = Vec::new();
        for parameter in parameters {
            let name = parameter
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let place = parameter
                .get("in")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let required = parameter.get("required") == Some(&Value::Bool(true));
            match place {
                "path" => path = path.replace(&format!("{{{name}}}"), &self.example(parameter)?),
                "query" if required => query.push(format!("{name}={}", self.example(parameter)?)),
                _ => {}
            }
        }
        let header = if requirement_text(security).is_some() {
            " -H \"Authorization: Bearer $TOKEN\""
        } else {
            ""
        };
        let method = match operation.method {
            "get" => String::new(),
            other => format!(" -X {}", other.to_ascii_uppercase()),
        };
        let body = if operation.operation.get("requestBody").is_some() {
            " -H \"Content-Type: application/json\" --data @body.json"
        } else {
            ""
        };
        let url = |extra: Option<&str>| {
            let mut query = query.clone();
            query.extend(extra.map(str::to_owned));
            if query.is_empty() {
                format!("\"$HUB{path}\"")
            } else {
                format!("\"$HUB{path}?{}\"", query.join("&"))
            }
        };
        writeln!(out, "**Example**\n\n```sh").unwrap();
        if let Some(example) = example {
            for request in example.requests {
                writeln!(out, "curl -sS{method}{header}{body} \"$HUB{request}\"").unwrap();
            }
            writeln!(out, "```\n").unwrap();
            if let Some(note) = example.note {
                writeln!(out, "{note}\n").unwrap();
            }
            return Ok(());
        }
        writeln!(out, "curl -sS{method}{header}{body} {}", url(None)).unwrap();
        // Routes that can answer CSV choose it with `format=csv`.
        let csv = operation
            .operation
            .get("responses")
            .and_then(|r| r.pointer("/200/content/text~1csv"))
            .is_some();
        let format = parameters
            .iter()
            .any(|p| p.get("name").and_then(Value::as_str) == Some("format"));
        if csv && format {
            writeln!(
                out,
                "curl -sS{method}{header}{body} {}",
                url(Some("format=csv"))
            )
            .unwrap();
        }
        writeln!(out, "```\n").unwrap();
        Ok(())
    }

    /// A value for a parameter in an example: the document's example or default, the first
    /// allowed value, or a placeholder.
    fn example(&self, parameter: &Map<String, Value>) -> Result<String, ReferenceError> {
        let schema = parameter
            .get("schema")
            .map(|s| self.resolve(s, "/parameters"))
            .transpose()?;
        let candidates = [
            parameter.get("example"),
            schema.and_then(|s| s.get("example")),
            schema.and_then(|s| s.get("default")),
            schema.and_then(|s| s.pointer("/enum/0")),
        ];
        Ok(match candidates.into_iter().flatten().next() {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => format!(
                "<{}>",
                parameter
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            ),
        })
    }

    fn render_components(&self, out: &mut String) -> Result<(), ReferenceError> {
        let responses = self
            .document
            .pointer("/components/responses")
            .and_then(Value::as_object);
        let schemas = self
            .document
            .pointer("/components/schemas")
            .and_then(Value::as_object);
        if responses.is_none_or(Map::is_empty) && schemas.is_none_or(Map::is_empty) {
            return Ok(());
        }
        writeln!(out, "## Shared definitions\n").unwrap();
        if let Some(responses) = responses.filter(|r| !r.is_empty()) {
            writeln!(
                out,
                "### Responses\n\n| name | meaning | content |\n|---|---|---|"
            )
            .unwrap();
            for (name, response) in responses {
                let at = format!("/components/responses/{}", escape_pointer(name));
                let response = self.resolve(response, &at)?;
                let mut content = Vec::new();
                if let Some(media) = response.get("content").and_then(Value::as_object) {
                    for (media_type, media) in media {
                        match media.get("schema") {
                            Some(schema) => content
                                .push(format!("`{media_type}`: {}", self.type_text(schema, &at)?)),
                            None => content.push(format!("`{media_type}`")),
                        }
                    }
                }
                writeln!(
                    out,
                    "| `{name}` | {} | {} |",
                    cell(
                        response
                            .get("description")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                    ),
                    if content.is_empty() {
                        "—".to_owned()
                    } else {
                        content.join("; ")
                    }
                )
                .unwrap();
            }
            out.push('\n');
        }
        if let Some(schemas) = schemas.filter(|s| !s.is_empty()) {
            writeln!(out, "### Schemas\n").unwrap();
            for (name, schema) in schemas {
                let at = format!("/components/schemas/{}", escape_pointer(name));
                let resolved = self.resolve(schema, &at)?;
                writeln!(
                    out,
                    "<a id=\"{}\"></a>\n\n#### `{name}`\n",
                    schema_anchor(name)
                )
                .unwrap();
                if let Some(description) = resolved.get("description").and_then(Value::as_str) {
                    writeln!(out, "{description}\n").unwrap();
                }
                writeln!(out, "{}\n", self.type_text(resolved, &at)?).unwrap();
                if has_structure(resolved) {
                    self.outline(out, resolved, 0, &at)?;
                    out.push('\n');
                }
            }
        }
        Ok(())
    }

    /// A short text for a schema's type: `string`, `integer (int32)`, `array of string`, a
    /// link to a named schema, `string or null`.
    fn type_text(&self, schema: &Value, at: &str) -> Result<String, ReferenceError> {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            self.resolve(schema, at)?;
            return Ok(match reference.strip_prefix("#/components/schemas/") {
                Some(name) => format!("[`{name}`](#{})", schema_anchor(name)),
                None => format!("`{reference}`"),
            });
        }
        for combinator in ["oneOf", "anyOf", "allOf"] {
            if let Some(parts) = schema.get(combinator).and_then(Value::as_array) {
                let texts: Vec<String> = parts
                    .iter()
                    .map(|p| self.type_text(p, at))
                    .collect::<Result<_, _>>()?;
                let joiner = if combinator == "allOf" {
                    " and "
                } else {
                    " or "
                };
                return Ok(texts.join(joiner));
            }
        }
        let mut kinds: Vec<String> = match schema.get("type") {
            Some(Value::String(kind)) => vec![kind.clone()],
            Some(Value::Array(kinds)) => kinds
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => vec![],
        };
        if kinds.is_empty() {
            kinds.push(if schema.get("properties").is_some() {
                "object".to_owned()
            } else {
                "any".to_owned()
            });
        }
        let mut texts = Vec::new();
        for kind in kinds {
            let text = match kind.as_str() {
                "array" => match schema.get("items") {
                    Some(items) => format!("array of {}", self.type_text(items, at)?),
                    None => "array".to_owned(),
                },
                _ => match schema.get("format").and_then(Value::as_str) {
                    Some(format) => format!("{kind} ({format})"),
                    None => kind,
                },
            };
            texts.push(text);
        }
        if schema.get("nullable") == Some(&Value::Bool(true)) {
            texts.push("null".to_owned());
        }
        Ok(texts.join(" or "))
    }

    /// Allowed values and limits of a schema, as text; empty when it has none.
    fn allowed_text(&self, schema: Option<&Value>) -> Result<String, ReferenceError> {
        let Some(schema) = schema else {
            return Ok(String::new());
        };
        let mut parts = Vec::new();
        let values = schema
            .get("enum")
            .or_else(|| schema.pointer("/items/enum"))
            .and_then(Value::as_array);
        if let Some(values) = values {
            parts.push(
                values
                    .iter()
                    .map(|v| format!("`{}`", plain(v)))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
        let bound = |key: &str| schema.get(key).map(plain);
        match (bound("minimum"), bound("maximum")) {
            (Some(min), Some(max)) => parts.push(format!("{min} to {max}")),
            (Some(min), None) => parts.push(format!("at least {min}")),
            (None, Some(max)) => parts.push(format!("at most {max}")),
            (None, None) => {}
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            parts.push(format!("matches `{pattern}`"));
        }
        match (bound("minLength"), bound("maxLength")) {
            (Some(min), Some(max)) => parts.push(format!("{min} to {max} characters")),
            (None, Some(max)) => parts.push(format!("at most {max} characters")),
            (Some(min), None) => parts.push(format!("at least {min} characters")),
            (None, None) => {}
        }
        Ok(cell(&parts.join("; ")))
    }

    /// The fields of an object schema (and of arrays of objects) as a nested list.
    fn outline(
        &self,
        out: &mut String,
        schema: &Value,
        depth: usize,
        at: &str,
    ) -> Result<(), ReferenceError> {
        if depth > 8 {
            return Ok(());
        }
        let schema = self.resolve(schema, at)?;
        let schema = match schema.get("items") {
            Some(items) if schema.get("properties").is_none() => self.resolve(items, at)?,
            _ => schema,
        };
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return Ok(());
        };
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let indent = "  ".repeat(depth);
        for (name, property) in properties {
            let mut line = format!("{indent}- `{name}`: {}", self.type_text(property, at)?);
            if required.contains(&name.as_str()) {
                line.push_str(", required");
            }
            let resolved = self.resolve(property, at)?;
            if let Some(description) = property
                .get("description")
                .or_else(|| resolved.get("description"))
                .and_then(Value::as_str)
            {
                write!(line, ". {}", description.replace('\n', " ")).unwrap();
            }
            writeln!(out, "{line}").unwrap();
            if property.get("$ref").is_none() && has_structure(resolved) {
                self.outline(out, resolved, depth + 1, at)?;
            }
        }
        Ok(())
    }
}

/// Whether a schema has fields worth an outline.
fn has_structure(schema: &Value) -> bool {
    schema.get("properties").is_some()
        || schema
            .get("items")
            .is_some_and(|items| items.get("properties").is_some())
}

fn schema_anchor(name: &str) -> String {
    format!("schema-{}", name.to_ascii_lowercase())
}

/// How to present credentials of one security scheme.
fn scheme_text(scheme: &Value) -> String {
    let get = |key: &str| scheme.get(key).and_then(Value::as_str).unwrap_or_default();
    let mut text = match (get("type"), get("scheme").to_ascii_lowercase().as_str()) {
        ("http", "bearer") => "HTTP header `Authorization: Bearer <token>`".to_owned(),
        ("http", "basic") => "HTTP basic authentication".to_owned(),
        ("http", other) => format!("HTTP `{other}` authentication"),
        ("apiKey", _) => format!("API key in {} `{}`", get("in"), get("name")),
        (other, _) => format!("`{other}`"),
    };
    if !get("description").is_empty() {
        write!(text, ". {}", get("description")).unwrap();
    }
    text
}

/// What a security requirement list asks for, or `None` when nothing (absent, empty, or one
/// alternative is the empty requirement).
fn requirement_text(security: Option<&Value>) -> Option<String> {
    let alternatives = security?.as_array()?;
    if alternatives.is_empty()
        || alternatives
            .iter()
            .any(|a| a.as_object().is_some_and(Map::is_empty))
    {
        return None;
    }
    let texts: Vec<String> = alternatives
        .iter()
        .filter_map(Value::as_object)
        .map(|requirement| {
            requirement
                .iter()
                .map(|(scheme, roles)| {
                    let roles: Vec<String> = roles
                        .as_array()
                        .map(|r| {
                            r.iter()
                                .filter_map(Value::as_str)
                                .map(|r| format!("`{r}`"))
                                .collect()
                        })
                        .unwrap_or_default();
                    if roles.is_empty() {
                        format!("a `{scheme}` token (any role)")
                    } else {
                        format!("a `{scheme}` token with role {}", roles.join(" or "))
                    }
                })
                .collect::<Vec<_>>()
                .join(" and ")
        })
        .collect();
    Some(texts.join(", or "))
}

fn default_text(schema: Option<&Value>) -> String {
    match schema.and_then(|s| s.get("default")) {
        Some(value) => cell(&format!("`{}`", plain(value))),
        None => String::new(),
    }
}

/// A JSON value as it would be typed: strings without quotes.
fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "—".to_owned()
    } else {
        text.to_owned()
    }
}

/// Text that is safe inside a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
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
}
