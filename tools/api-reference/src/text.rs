//! Values as Markdown text.

use serde_json::Value;

/// A JSON value as it would be typed: strings without quotes.
pub(crate) fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// The text, or a dash when it is empty.
pub(crate) fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "—".to_owned()
    } else {
        text.to_owned()
    }
}

/// Text that is safe inside a Markdown table cell.
pub(crate) fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}
