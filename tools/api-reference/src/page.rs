//! The page around the operations: title and servers, authentication, the index, and the
//! shared components.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::document::{escape_pointer, Reference};
use crate::examples::Example;
use crate::schema::{has_structure, schema_anchor};
use crate::security::{requirement_text, scheme_text};
use crate::text::cell;
use crate::{ReferenceError, REFRESH_COMMAND};

impl<'a> Reference<'a> {
    /// The whole reference.
    pub(crate) fn render(&self, examples: &[Example]) -> Result<String, ReferenceError> {
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

    /// The security schemes and what the document requires by default.
    pub(crate) fn render_authentication(&self, out: &mut String) -> Result<(), ReferenceError> {
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

    /// Every operation with its summary, linked to its section.
    pub(crate) fn render_index(&self, out: &mut String) {
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

    /// The shared responses and the named schemas.
    pub(crate) fn render_components(&self, out: &mut String) -> Result<(), ReferenceError> {
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
}
