//! Schemas as text: a type in a few words, allowed values and limits, defaults, and an outline
//! of an object's fields.

use std::fmt::Write as _;

use serde_json::Value;

use crate::document::Reference;
use crate::text::{cell, plain};
use crate::ReferenceError;

impl<'a> Reference<'a> {
    /// A short text for a schema's type: `string`, `integer (int32)`, `array of string`, a
    /// link to a named schema, `string or null`.
    pub(crate) fn type_text(&self, schema: &Value, at: &str) -> Result<String, ReferenceError> {
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
    pub(crate) fn allowed_text(&self, schema: Option<&Value>) -> Result<String, ReferenceError> {
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
    pub(crate) fn outline(
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
pub(crate) fn has_structure(schema: &Value) -> bool {
    schema.get("properties").is_some()
        || schema
            .get("items")
            .is_some_and(|items| items.get("properties").is_some())
}

/// The anchor of a named schema in the reference.
pub(crate) fn schema_anchor(name: &str) -> String {
    format!("schema-{}", name.to_ascii_lowercase())
}

/// A schema's default as a table cell; empty when it has none.
pub(crate) fn default_text(schema: Option<&Value>) -> String {
    match schema.and_then(|s| s.get("default")) {
        Some(value) => cell(&format!("`{}`", plain(value))),
        None => String::new(),
    }
}
