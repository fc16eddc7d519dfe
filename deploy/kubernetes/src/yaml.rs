//! YAML documents as JSON values.
//!
//! kubectl reads YAML the YAML 1.1 way (`yes` and `on` are booleans, `0440` is octal), the
//! parser here the YAML 1.2 way. Where the two would disagree, the manifests must say what
//! they mean: such scalars are refused, quoted or not.

use serde::Deserialize as _;
use serde_json::Value;

/// Every document of `text` that is not empty, as a JSON value. Duplicate keys, non-string
/// keys and scalars that YAML 1.1 and 1.2 read differently are errors.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    ambiguous_numbers(text)?;
    let mut out = Vec::new();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = serde_yaml_ng::Value::deserialize(document)
            .map_err(|err| format!("document {}: {err}", index + 1))?;
        if value.is_null() {
            continue;
        }
        let json =
            serde_json::to_value(&value).map_err(|err| format!("document {}: {err}", index + 1))?;
        let mut problems = Vec::new();
        ambiguous_strings(&json, "", &mut problems);
        if !problems.is_empty() {
            return Err(format!("document {}: {}", index + 1, problems.join("; ")));
        }
        out.push(json);
    }
    Ok(out)
}

/// Strings that YAML 1.1 reads as booleans when unquoted, and YAML 1.2 as strings.
const YAML11_BOOLEANS: [&str; 16] = [
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

fn ambiguous_strings(value: &Value, path: &str, problems: &mut Vec<String>) {
    match value {
        Value::String(text) if YAML11_BOOLEANS.contains(&text.as_str()) => problems.push(format!(
            "{path}: the string {text:?} is a boolean to YAML 1.1 readers; use true/false, or a different text"
        )),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                ambiguous_strings(item, &format!("{path}[{index}]"), problems);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                ambiguous_strings(item, &path, problems);
            }
        }
        _ => {}
    }
}

/// Unquoted numbers with a leading zero (`0440`) are octal to YAML 1.1 and decimal to 1.2.
fn ambiguous_numbers(text: &str) -> Result<(), String> {
    let pattern =
        regex::Regex::new(r"^[^#]*?(?::|-)\s+([-+]?0[0-9_]+)\s*(?:#.*)?$").expect("regex");
    let mut in_block = None::<usize>;
    for (number, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        // Lines of a block scalar (`key: |`) are text, not YAML.
        if let Some(block) = in_block {
            if line.trim().is_empty() || indent > block {
                continue;
            }
            in_block = None;
        }
        let content = line.split(" #").next().unwrap_or(line).trim_end();
        if content.ends_with('|')
            || content.ends_with('>')
            || content.ends_with("|-")
            || content.ends_with(">-")
            || content.ends_with("|+")
            || content.ends_with(">+")
        {
            in_block = Some(indent);
        }
        if let Some(captures) = pattern.captures(line) {
            return Err(format!(
                "line {}: {} is octal to YAML 1.1 readers and decimal to YAML 1.2 ones; write it in decimal without the leading zero, or quote it",
                number + 1,
                &captures[1]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_document_and_skips_empty_ones() {
        let docs = documents("---\na: 1\n---\n---\nb: [x]\n").unwrap();
        assert_eq!(
            docs,
            vec![serde_json::json!({"a": 1}), serde_json::json!({"b": ["x"]})]
        );
    }

    #[test]
    fn refuses_what_yaml_versions_read_differently() {
        let err = documents("mode: 0440\n").unwrap_err();
        assert!(err.contains("line 1: 0440 is octal"), "{err}");
        let err = documents("a:\n  - on\n").unwrap_err();
        assert!(err.contains("a[0]: the string \"on\""), "{err}");
        let err = documents("a: \"yes\"\n").unwrap_err();
        assert!(err.contains("a: the string \"yes\""), "{err}");
        // Inside a block scalar it is text.
        documents("script: |\n  chmod 0755 x\n  x: 0440\nmode: 288\n").unwrap();
        // Not a leading zero.
        documents("a: 0\nb: 10\nc: \"0440\"\n").unwrap();
    }

    #[test]
    fn refuses_duplicate_keys() {
        let err = documents("a: 1\na: 2\n").unwrap_err();
        assert!(err.contains("duplicate"), "{err}");
    }
}
