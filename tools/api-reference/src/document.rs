//! The document as the reference reads it: its operations (each a method on a path) and its
//! local `$ref`s.

use serde_json::{Map, Value};

use crate::{malformed, ReferenceError};

/// The HTTP methods of a path item, in the order the reference lists them.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// One operation: a method on a path.
pub(crate) struct Operation<'a> {
    pub(crate) path: &'a str,
    pub(crate) method: &'a str,
    /// The path item, for parameters shared by its operations.
    pub(crate) item: &'a Map<String, Value>,
    pub(crate) operation: &'a Map<String, Value>,
}

impl Operation<'_> {
    /// The operation's anchor in the reference: the method and the path's letters and digits.
    pub(crate) fn anchor(&self) -> String {
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

    /// Where the operation is in the document, as a JSON pointer.
    pub(crate) fn pointer(&self) -> String {
        format!("/paths/{}/{}", escape_pointer(self.path), self.method)
    }
}

/// A path as one segment of a JSON pointer.
pub(crate) fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The document and its operations, in path order and, per path, in [`METHODS`] order.
pub(crate) struct Reference<'a> {
    pub(crate) document: &'a Value,
    pub(crate) operations: Vec<Operation<'a>>,
}

impl<'a> Reference<'a> {
    /// Reads the document's version and operations.
    pub(crate) fn new(document: &'a Value) -> Result<Reference<'a>, ReferenceError> {
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
    pub(crate) fn resolve(&self, value: &'a Value, at: &str) -> Result<&'a Value, ReferenceError> {
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

    /// The operation's parameters: the path item's, overridden by the operation's own.
    pub(crate) fn parameters(
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
}
