//! Example requests: the hub's, checked against the document, and the `curl` lines the
//! reference shows for each operation.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::document::{escape_pointer, Operation, Reference};
use crate::security::requirement_text;
use crate::{malformed, ReferenceError};

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
    Example {
        method: "get",
        path: "/api/v1/rollouts",
        requests: &[
            "/api/v1/rollouts?app=checkout&limit=10",
            "/api/v1/rollouts?status=stalled&group=emea",
        ],
        note: None,
    },
    Example {
        method: "get",
        path: "/api/v1/rollouts/{rollout}",
        requests: &["/api/v1/rollouts/$ROLLOUT?depth=2&limit=20"],
        note: Some("`$ROLLOUT` is an `id` from `/api/v1/rollouts`, such as `checkout@1795338000000@1.5.0`."),
    },
    Example {
        method: "get",
        path: "/api/v1/delivery",
        requests: &[
            "/api/v1/delivery",
            "/api/v1/delivery?app=checkout&group=emea&window=7d",
        ],
        note: None,
    },
];

impl<'a> Reference<'a> {
    /// Refuses an example of an operation the document does not have, or one whose requests do
    /// not fit the path or name a parameter the operation does not take.
    pub(crate) fn check_example(&self, example: &Example) -> Result<(), ReferenceError> {
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

    /// The operation's example `curl` lines: the given example's requests, or one made from
    /// the document.
    pub(crate) fn render_examples(
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
    pub(crate) fn example(&self, parameter: &Map<String, Value>) -> Result<String, ReferenceError> {
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
}
