//! Typed look-ups in loosely typed JSON: a value of the wrong type is noted as a warning and
//! treated as absent, so one odd field never costs the whole object.

use fleetscope_model::Timestamp;
use serde_json::Value;

/// How many characters of a bad value a message quotes before cutting it with `…`.
const QUOTE_CHARS: usize = 60;

/// A bad value as a message quotes it: its JSON text, cut to a readable length.
pub(crate) fn describe(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTE_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// A place in an object: the value there (`None` when absent) and its path for messages
/// (`status.conditions[0].type`).
#[derive(Debug, Clone)]
pub(crate) struct Node<'a> {
    value: Option<&'a Value>,
    path: String,
}

impl<'a> Node<'a> {
    pub(crate) fn root(value: &'a Value) -> Node<'a> {
        Node {
            value: Some(value),
            path: String::new(),
        }
    }

    /// The value, with JSON `null` counted as absent (Kubernetes writes both for "not set").
    pub(crate) fn value(&self) -> Option<&'a Value> {
        self.value.filter(|value| !value.is_null())
    }
}

/// Reads fields and collects the warnings about the ones it had to ignore.
#[derive(Debug, Default)]
pub(crate) struct Reader {
    warnings: Vec<String>,
}

impl Reader {
    /// Adds a warning unless the same text is already there (a bad parent is met once per child
    /// read through it).
    pub(crate) fn warn(&mut self, warning: String) {
        if !self.warnings.contains(&warning) {
            self.warnings.push(warning);
        }
    }

    pub(crate) fn into_warnings(self) -> Vec<String> {
        self.warnings
    }

    /// The member `key` of an object node.
    pub(crate) fn field<'a>(&mut self, node: &Node<'a>, key: &str) -> Node<'a> {
        let path = if node.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", node.path)
        };
        let value = match node.value() {
            None => None,
            Some(Value::Object(map)) => map.get(key),
            Some(other) => {
                self.warn(format!(
                    "{} must be an object, found {}; ignored",
                    node.path,
                    describe(other)
                ));
                None
            }
        };
        Node { value, path }
    }

    /// The node at `keys`, one object member after the other.
    pub(crate) fn at<'a>(&mut self, node: &Node<'a>, keys: &[&str]) -> Node<'a> {
        let mut current = node.clone();
        for key in keys {
            current = self.field(&current, key);
        }
        current
    }

    /// The elements of an array node; none when absent or not an array.
    pub(crate) fn items<'a>(&mut self, node: &Node<'a>) -> Vec<Node<'a>> {
        match node.value() {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(index, value)| Node {
                    value: Some(value),
                    path: format!("{}[{index}]", node.path),
                })
                .collect(),
            Some(other) => {
                self.wrong_type(node, "an array", other);
                Vec::new()
            }
        }
    }

    pub(crate) fn str<'a>(&mut self, node: &Node<'a>) -> Option<&'a str> {
        match node.value() {
            None => None,
            Some(Value::String(text)) => Some(text),
            Some(other) => {
                self.wrong_type(node, "a string", other);
                None
            }
        }
    }

    /// A string field, empty when absent.
    pub(crate) fn string(&mut self, node: &Node<'_>) -> String {
        self.str(node).unwrap_or_default().to_owned()
    }

    /// The strings of an array of strings, skipping (with a warning) elements of another type.
    pub(crate) fn strings(&mut self, node: &Node<'_>) -> Vec<String> {
        self.items(node)
            .iter()
            .filter_map(|item| self.str(item).map(str::to_owned))
            .collect()
    }

    pub(crate) fn bool(&mut self, node: &Node<'_>) -> Option<bool> {
        match node.value() {
            None => None,
            Some(Value::Bool(flag)) => Some(*flag),
            Some(other) => {
                self.wrong_type(node, "true or false", other);
                None
            }
        }
    }

    pub(crate) fn i64(&mut self, node: &Node<'_>) -> Option<i64> {
        match node.value() {
            None => None,
            Some(value @ Value::Number(number)) => {
                let whole = number.as_i64();
                if whole.is_none() {
                    self.wrong_type(node, "a whole number", value);
                }
                whole
            }
            Some(other) => {
                self.wrong_type(node, "a whole number", other);
                None
            }
        }
    }

    /// An RFC 3339 time, cut to whole seconds; an unreadable one is ignored with a warning.
    pub(crate) fn timestamp(&mut self, node: &Node<'_>) -> Option<Timestamp> {
        let text = self.str(node)?;
        match parse_timestamp(text) {
            Ok(at) => Some(at),
            Err(err) => {
                self.warn(format!(
                    "{} {text:?} is not an RFC 3339 time ({err}); ignored",
                    node.path
                ));
                None
            }
        }
    }

    fn wrong_type(&mut self, node: &Node<'_>, expected: &str, found: &Value) {
        self.warn(format!(
            "{} must be {expected}, found {}; ignored",
            node.path,
            describe(found)
        ));
    }
}

/// Parses an RFC 3339 time (`2024-07-16T12:00:00Z`, `2024-07-16T14:00:00.5+02:00`) to whole
/// seconds since the epoch, dropping any fraction.
pub(crate) fn parse_timestamp(text: &str) -> Result<Timestamp, jiff::Error> {
    let at: jiff::Timestamp = text.parse()?;
    Ok(Timestamp(at.as_second()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn wrong_types_become_warnings() {
        let object = json!({"status": {"conditions": "none", "n": 1.5, "flag": "yes"}, "spec": 3});
        let root = Node::root(&object);
        let mut reader = Reader::default();
        let conditions = reader.at(&root, &["status", "conditions"]);
        assert!(reader.items(&conditions).is_empty());
        let n = reader.at(&root, &["status", "n"]);
        assert_eq!(reader.i64(&n), None);
        let flag = reader.at(&root, &["status", "flag"]);
        assert_eq!(reader.bool(&flag), None);
        let suspend = reader.at(&root, &["spec", "suspend"]);
        assert_eq!(reader.bool(&suspend), None);
        assert_eq!(
            reader.bool(&suspend),
            None,
            "a repeated warning is kept once"
        );
        assert_eq!(
            reader.into_warnings(),
            [
                r#"status.conditions must be an array, found "none"; ignored"#,
                "status.n must be a whole number, found 1.5; ignored",
                r#"status.flag must be true or false, found "yes"; ignored"#,
                "spec must be an object, found 3; ignored",
            ]
        );
    }

    #[test]
    fn null_counts_as_absent() {
        let object = json!({"status": null});
        let mut reader = Reader::default();
        let revision = reader.at(&Node::root(&object), &["status", "revision"]);
        assert_eq!(reader.str(&revision), None);
        assert!(reader.into_warnings().is_empty());
    }

    #[test]
    fn timestamps_are_whole_seconds_in_utc() {
        assert_eq!(
            parse_timestamp("1970-01-01T00:01:00Z").unwrap(),
            Timestamp(60)
        );
        assert_eq!(
            parse_timestamp("1970-01-01T02:01:00.999+02:00").unwrap(),
            Timestamp(60)
        );
        assert!(parse_timestamp("2024-07-16 12:00").is_err());
        assert!(
            parse_timestamp("2024-07-16T12:00:00").is_err(),
            "an offset is required"
        );
    }

    #[test]
    fn descriptions_are_cut() {
        let long = Value::String("x".repeat(200));
        let text = describe(&long);
        assert!(text.ends_with('…'));
        assert_eq!(text.chars().count(), QUOTE_CHARS + 1);
        assert_eq!(describe(&json!([1, 2])), "[1,2]");
    }
}
