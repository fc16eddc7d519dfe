//! What the document's security schemes and requirements ask of a caller, as text.

use std::fmt::Write as _;

use serde_json::{Map, Value};

/// How to present credentials of one security scheme.
pub(crate) fn scheme_text(scheme: &Value) -> String {
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
pub(crate) fn requirement_text(security: Option<&Value>) -> Option<String> {
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
