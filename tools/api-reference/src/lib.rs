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
//!
//! `document` reads the operations and references, `page` writes the page around them,
//! `operation` one operation's section, `schema` and `security` describe schemas and
//! requirements, `examples` holds the hub's example requests and checks them, `text` the
//! Markdown text of values.

mod document;
mod examples;
mod operation;
mod page;
mod schema;
mod security;
mod text;

use serde_json::Value;

use document::Reference;
pub use examples::{Example, EXAMPLES};

/// The command that rewrites `docs/api.md` from the current document.
pub const REFRESH_COMMAND: &str =
    "UPDATE_DOCS=1 cargo test -p fleetscope-api-reference --test api_reference";

/// Why a document could not be turned into a reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("openapi document: {at}: {message}")]
pub struct ReferenceError {
    /// Where in the document, as a JSON pointer.
    pub at: String,
    pub message: String,
}

/// An error at `at`, a JSON pointer into the document.
fn malformed(at: &str, message: impl Into<String>) -> ReferenceError {
    ReferenceError {
        at: at.to_owned(),
        message: message.into(),
    }
}

/// The reference of `document` as Markdown, with `examples` for the operations they name.
pub fn markdown(document: &Value, examples: &[Example]) -> Result<String, ReferenceError> {
    let reference = Reference::new(document)?;
    for example in examples {
        reference.check_example(example)?;
    }
    reference.render(examples)
}

#[cfg(test)]
mod tests;
