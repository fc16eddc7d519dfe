//! One operation's section: summary, authentication, parameters, request body, responses.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::document::{escape_pointer, Operation, Reference};
use crate::examples::Example;
use crate::schema::{default_text, has_structure};
use crate::security::requirement_text;
use crate::text::{cell, or_dash};
use crate::{malformed, ReferenceError};

impl<'a> Reference<'a> {
    /// One operation's section.
    pub(crate) fn render_operation(
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

    /// The parameters as a table.
    pub(crate) fn render_parameters(
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

    /// The request body: whether it is required and each media type's schema.
    pub(crate) fn render_request_body(
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
    pub(crate) fn render_content(
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

    /// The responses, each status with its description and content.
    pub(crate) fn render_responses(
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
}
