//! Custom resources checked against the structural `openAPIV3Schema` of their
//! CustomResourceDefinition, the way an API server with strict field validation checks them:
//! unknown fields are errors (not pruned), required fields must be there, and types, enums,
//! patterns, bounds and list uniqueness hold.
//!
//! The validator knows the schema keywords the vendored CRDs use. A schema with any other
//! keyword (CEL rules, `oneOf`, ...) is refused when it is loaded rather than half-checked.
//! Defaults are not applied: they fill in what is left out, which is never an error.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// Keywords of a structural schema this validator implements.
const KNOWN_KEYWORDS: &[&str] = &[
    "type",
    "description",
    "properties",
    "required",
    "items",
    "additionalProperties",
    "default",
    "enum",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "anyOf",
    "nullable",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-preserve-unknown-fields",
];

/// One CustomResourceDefinition: its kind and the schema of each served version.
#[derive(Debug, Clone)]
pub struct Crd {
    pub group: String,
    pub kind: String,
    pub namespaced: bool,
    /// (version, openAPIV3Schema)
    pub versions: Vec<(String, Value)>,
}

impl Crd {
    /// Reads a CRD's YAML and checks that its schemas use only keywords this validator knows.
    pub fn parse(text: &str) -> Result<Crd, String> {
        let docs = crate::yaml::documents(text)?;
        let [crd] = docs.as_slice() else {
            return Err(format!("expected one document, found {}", docs.len()));
        };
        let field = |pointer: &str| {
            crd.pointer(pointer)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("{pointer} is missing"))
        };
        if field("/kind")? != "CustomResourceDefinition" {
            return Err("not a CustomResourceDefinition".to_owned());
        }
        let scope = field("/spec/scope")?;
        let mut versions = Vec::new();
        for version in crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .ok_or("spec.versions is missing")?
        {
            if version.get("served") != Some(&Value::Bool(true)) {
                continue;
            }
            let name = version
                .get("name")
                .and_then(Value::as_str)
                .ok_or("a version has no name")?;
            let schema = version
                .pointer("/schema/openAPIV3Schema")
                .ok_or_else(|| format!("version {name} has no openAPIV3Schema"))?;
            let mut unknown = BTreeSet::new();
            keywords(schema, &mut unknown);
            if !unknown.is_empty() {
                return Err(format!(
                    "version {name} uses schema keywords this validator does not implement: {unknown:?}"
                ));
            }
            versions.push((name.to_owned(), schema.clone()));
        }
        Ok(Crd {
            group: field("/spec/group")?,
            kind: field("/spec/names/kind")?,
            namespaced: scope == "Namespaced",
            versions,
        })
    }

    /// Checks `object` (of apiVersion `<group>/<version>`). Returns every problem, each
    /// starting with the path of its field.
    pub fn validate(&self, version: &str, object: &Value) -> Result<(), Vec<String>> {
        let Some((_, schema)) = self.versions.iter().find(|(v, _)| v == version) else {
            return Err(vec![format!(
                "apiVersion: {}/{version} is not served by the {} CRD",
                self.group, self.kind
            )]);
        };
        let mut problems = Vec::new();
        let Some(map) = object.as_object() else {
            return Err(vec!["an object is required".to_owned()]);
        };
        // ObjectMeta is left to the API server's own type, as it is for a custom resource.
        match map.get("metadata") {
            None => problems.push("metadata: required".to_owned()),
            Some(metadata) => {
                let mut meta_problems = Vec::new();
                if let Some(meta) = crate::typed::roundtrip::<
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                >(metadata, &mut meta_problems)
                {
                    if meta.name.is_none() {
                        meta_problems.push("name: required".to_owned());
                    }
                    if self.namespaced != meta.namespace.is_some() {
                        meta_problems.push(if self.namespaced {
                            "namespace: required here (every namespaced object names its namespace)"
                                .to_owned()
                        } else {
                            "namespace: this kind is cluster-scoped".to_owned()
                        });
                    }
                }
                problems.extend(meta_problems.into_iter().map(|p| format!("metadata.{p}")));
            }
        }
        let mut rest = map.clone();
        rest.remove("metadata");
        let mut schema = schema.clone();
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.remove("metadata");
        }
        check(&Value::Object(rest), &schema, "", &mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }
}

fn keywords(schema: &Value, unknown: &mut BTreeSet<String>) {
    let Some(map) = schema.as_object() else {
        return;
    };
    for (key, value) in map {
        if !KNOWN_KEYWORDS.contains(&key.as_str()) {
            unknown.insert(key.clone());
        }
        match key.as_str() {
            "properties" => value
                .as_object()
                .into_iter()
                .flat_map(Map::values)
                .for_each(|s| keywords(s, unknown)),
            "items" | "additionalProperties" => keywords(value, unknown),
            "anyOf" => value
                .as_array()
                .into_iter()
                .flatten()
                .for_each(|s| keywords(s, unknown)),
            _ => {}
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn type_matches(value: &Value, kind: &str) -> bool {
    match kind {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => false,
    }
}

fn name_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Checks `value` at `path` against `schema`.
fn check(value: &Value, schema: &Value, path: &str, problems: &mut Vec<String>) {
    let shown = if path.is_empty() {
        "(the object)"
    } else {
        path
    };
    if value.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) {
            problems.push(format!("{shown}: null is not allowed; leave the field out"));
        }
        return;
    }
    let int_or_string = schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    if int_or_string {
        if !(value.is_string() || type_matches(value, "integer")) {
            problems.push(format!(
                "{shown}: an integer or a string is required, not {}",
                name_of(value)
            ));
            return;
        }
    } else if let Some(kind) = schema.get("type").and_then(Value::as_str) {
        if !type_matches(value, kind) {
            problems.push(format!("{shown}: {kind} required, not {}", name_of(value)));
            return;
        }
    } else if schema.get("x-kubernetes-preserve-unknown-fields") != Some(&Value::Bool(true)) {
        problems.push(format!("{shown}: the schema gives no type here"));
        return;
    }
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        // Structural schemas use anyOf for alternatives of value constraints only.
        let any = options.iter().any(|option| {
            let mut sub = Vec::new();
            check(value, option, path, &mut sub);
            sub.is_empty()
        });
        if !any {
            problems.push(format!(
                "{shown}: matches none of the alternatives of its schema"
            ));
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            problems.push(format!(
                "{shown}: {value} is not one of {}",
                Value::Array(allowed.clone())
            ));
        }
    }
    match value {
        Value::Object(map) => check_object(map, schema, path, problems),
        Value::Array(items) => check_array(items, schema, path, problems),
        Value::String(text) => check_string(text, schema, shown, problems),
        Value::Number(number) => check_number(number, schema, shown, problems),
        _ => {}
    }
}

fn check_object(map: &Map<String, Value>, schema: &Value, path: &str, problems: &mut Vec<String>) {
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            problems.push(format!("{}: required field missing", join(path, name)));
        }
    }
    for (key, item) in map {
        let at = join(path, key);
        if let Some(property) = properties.and_then(|p| p.get(key)) {
            check(item, property, &at, problems);
        } else if let Some(additional) = additional {
            match additional {
                Value::Bool(true) => {}
                Value::Bool(false) => problems.push(format!("{at}: unknown field")),
                schema => check(item, schema, &at, problems),
            }
        } else if !preserve {
            problems.push(format!("{at}: unknown field"));
        }
    }
}

fn check_array(items: &[Value], schema: &Value, path: &str, problems: &mut Vec<String>) {
    if let Some(item_schema) = schema.get("items") {
        for (index, item) in items.iter().enumerate() {
            check(item, item_schema, &format!("{path}[{index}]"), problems);
        }
    }
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
        if (items.len() as u64) < min {
            problems.push(format!("{path}: at least {min} items"));
        }
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
        if (items.len() as u64) > max {
            problems.push(format!("{path}: at most {max} items"));
        }
    }
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            let mut seen = BTreeSet::new();
            for item in items {
                if !seen.insert(item.to_string()) {
                    problems.push(format!("{path}: {item} is listed twice in a set"));
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let mut seen = BTreeSet::new();
            for item in items {
                let key: Vec<String> = keys
                    .iter()
                    .map(|k| item.get(*k).map_or("(none)".to_owned(), Value::to_string))
                    .collect();
                if !seen.insert(key.clone()) {
                    problems.push(format!("{path}: two items with the key {keys:?} = {key:?}"));
                }
            }
        }
        _ => {}
    }
}

fn check_string(text: &str, schema: &Value, shown: &str, problems: &mut Vec<String>) {
    let length = text.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if length < min {
            problems.push(format!("{shown}: at least {min} characters"));
        }
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if length > max {
            problems.push(format!("{shown}: at most {max} characters"));
        }
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(text) => {}
            Ok(_) => problems.push(format!("{shown}: {text:?} does not match {pattern}")),
            Err(err) => problems.push(format!(
                "{shown}: the schema's pattern {pattern} does not compile: {err}"
            )),
        }
    }
    if schema.get("format").and_then(Value::as_str) == Some("date-time") {
        let re = regex::Regex::new(
            r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$",
        )
        .expect("regex");
        if !re.is_match(text) {
            problems.push(format!("{shown}: {text:?} is not an RFC 3339 date-time"));
        }
    }
}

fn check_number(
    number: &serde_json::Number,
    schema: &Value,
    shown: &str,
    problems: &mut Vec<String>,
) {
    let value = number.as_f64().unwrap_or(f64::NAN);
    match schema.get("format").and_then(Value::as_str) {
        Some("int32") if number.as_i64().is_none_or(|n| i32::try_from(n).is_err()) => {
            problems.push(format!("{shown}: {number} is not a 32-bit integer"))
        }
        Some("int64") if number.as_i64().is_none() => {
            problems.push(format!("{shown}: {number} is not a 64-bit integer"))
        }
        _ => {}
    }
    let exclusive = |key: &str| schema.get(key) == Some(&Value::Bool(true));
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        if value < min || (exclusive("exclusiveMinimum") && value == min) {
            problems.push(format!("{shown}: {number} is below the minimum {min}"));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        if value > max || (exclusive("exclusiveMaximum") && value == max) {
            problems.push(format!("{shown}: {number} is above the maximum {max}"));
        }
    }
}
