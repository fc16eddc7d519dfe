//! Reading the fields of the token file's YAML mappings, shared by its `tokens` entries and
//! its `oidc` section: each problem starts with where it is (`tokens[2].role`, `oidc.issuer`).

use serde_yaml_ng::{Mapping, Value};

/// A field's text: `Some(None)` when absent or null, `None` (with a problem added) when it is
/// not a string.
pub(super) fn string_field<'a>(
    fields: &'a Mapping,
    field: &str,
    at: &str,
    problems: &mut Vec<String>,
) -> Option<Option<&'a str>> {
    match fields.get(field) {
        None | Some(Value::Null) => Some(None),
        Some(Value::String(text)) => Some(Some(text)),
        Some(_) => {
            problems.push(format!("{at}.{field}: expected a string"));
            None
        }
    }
}

/// How a key the mapping does not take is named in a problem.
pub(super) fn describe_key(key: &Value) -> String {
    match key.as_str() {
        Some(key) => format!("unknown field {key:?}"),
        None => "a field name that is not a string".to_owned(),
    }
}
