//! Labels and cluster selectors: label expressions (In, NotIn, Exists, DoesNotExist) and
//! group subtrees, in a structured form for the platform repo and the Kubernetes string syntax
//! (`env in (prod,stage),!legacy`) for query parameters.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::group::{GroupPath, GroupPathError};

/// A set of labels. Ordered, so anything derived from it is deterministic.
pub type Labels = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("label key {key:?} is invalid: {why}")]
    BadKey { key: String, why: &'static str },
    #[error("label value {value:?} for key {key:?} is invalid: {why}")]
    BadValue {
        key: String,
        value: String,
        why: &'static str,
    },
    #[error("selector requirement on {key:?}: operator {operator} {why}")]
    BadValues {
        key: String,
        operator: Operator,
        why: &'static str,
    },
    #[error("selector {selector:?}: {why} at position {position}")]
    Syntax {
        selector: String,
        position: usize,
        why: String,
    },
    #[error("selector group: {0}")]
    BadGroup(#[from] GroupPathError),
}

/// Checks a Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 characters of `[A-Za-z0-9._-]` that starts and ends alphanumeric.
pub fn validate_label_key(key: &str) -> Result<(), SelectorError> {
    let bad = |why| {
        Err(SelectorError::BadKey {
            key: key.to_owned(),
            why,
        })
    };
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > 253 {
            return bad("the prefix before '/' must be 1 to 253 characters");
        }
        if !prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        {
            return bad("the prefix before '/' must be a DNS subdomain (a-z, 0-9, '-', '.')");
        }
    }
    if name.is_empty() {
        return bad("the name is empty");
    }
    if name.len() > 63 {
        return bad("the name is longer than 63 characters");
    }
    check_label_chars(name).or_else(bad)
}

/// Checks a Kubernetes label value: empty, or at most 63 characters of `[A-Za-z0-9._-]` that
/// start and end alphanumeric.
pub fn validate_label_value(key: &str, value: &str) -> Result<(), SelectorError> {
    if value.is_empty() {
        return Ok(());
    }
    let bad = |why| {
        Err(SelectorError::BadValue {
            key: key.to_owned(),
            value: value.to_owned(),
            why,
        })
    };
    if value.len() > 63 {
        return bad("longer than 63 characters");
    }
    check_label_chars(value).or_else(bad)
}

fn check_label_chars(text: &str) -> Result<(), &'static str> {
    if !text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err("only letters, digits, '-', '_' and '.' are allowed");
    }
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !edge(text.chars().next()) || !edge(text.chars().last()) {
        return Err("must start and end with a letter or digit");
    }
    Ok(())
}

/// Validates every key and value of a label set, returning all problems at once.
pub fn validate_labels(labels: &Labels) -> Vec<SelectorError> {
    let mut errors = Vec::new();
    for (key, value) in labels {
        if let Err(err) = validate_label_key(key) {
            errors.push(err);
        }
        if let Err(err) = validate_label_value(key, value) {
            errors.push(err);
        }
    }
    errors
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
        })
    }
}

/// One label expression, as in Kubernetes' `matchExpressions`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelRequirement {
    pub key: String,
    pub operator: Operator,
    #[serde(default)]
    pub values: Vec<String>,
}

impl LabelRequirement {
    pub fn validate(&self) -> Vec<SelectorError> {
        let mut errors = Vec::new();
        if let Err(err) = validate_label_key(&self.key) {
            errors.push(err);
        }
        for value in &self.values {
            if let Err(err) = validate_label_value(&self.key, value) {
                errors.push(err);
            }
        }
        let bad = |why| SelectorError::BadValues {
            key: self.key.clone(),
            operator: self.operator,
            why,
        };
        match self.operator {
            Operator::In | Operator::NotIn if self.values.is_empty() => {
                errors.push(bad("needs at least one value"))
            }
            Operator::Exists | Operator::DoesNotExist if !self.values.is_empty() => {
                errors.push(bad("takes no values"))
            }
            _ => {}
        }
        errors
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// Which clusters something applies to. All parts must hold (AND); an empty selector matches
/// every cluster. `groups` matches a cluster inside any of the listed subtrees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: Labels,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelRequirement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupPath>,
}

impl ClusterSelector {
    /// Every problem with the selector, so a platform repo gets all its errors at once.
    pub fn validate(&self) -> Vec<SelectorError> {
        let mut errors = validate_labels(&self.match_labels);
        for requirement in &self.match_expressions {
            errors.extend(requirement.validate());
        }
        errors
    }

    /// `labels` are the cluster's effective labels (its own over those inherited from its groups).
    pub fn matches(&self, labels: &Labels, group: &GroupPath) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| r.matches(labels))
            && (self.groups.is_empty() || self.groups.iter().any(|g| group.is_within(g)))
    }

    /// Why the selector does not match: one sentence per failing part, empty when it matches.
    pub fn mismatches(&self, labels: &Labels, group: &GroupPath) -> Vec<String> {
        let mut reasons = Vec::new();
        for (key, want) in &self.match_labels {
            match labels.get(key) {
                Some(have) if have == want => {}
                Some(have) => reasons.push(format!("label {key} is {have:?}, not {want:?}")),
                None => reasons.push(format!("label {key} is not set (wanted {want:?})")),
            }
        }
        for requirement in &self.match_expressions {
            if !requirement.matches(labels) {
                let have = labels
                    .get(&requirement.key)
                    .map(|v| format!("{v:?}"))
                    .unwrap_or_else(|| "not set".to_owned());
                reasons.push(format!(
                    "{} {} {:?} fails (label is {have})",
                    requirement.key, requirement.operator, requirement.values
                ));
            }
        }
        if !self.groups.is_empty() && !self.groups.iter().any(|g| group.is_within(g)) {
            let groups: Vec<&str> = self.groups.iter().map(GroupPath::as_str).collect();
            reasons.push(format!(
                "group {group} is not within {}",
                groups.join(" or ")
            ));
        }
        reasons
    }

    /// Parses the Kubernetes label-selector string syntax into `match_expressions`:
    /// `key=value`, `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`, `!key`,
    /// joined by commas. Errors give the position of the problem.
    pub fn parse_labels(text: &str) -> Result<ClusterSelector, SelectorError> {
        let mut parser = SelectorParser { text, at: 0 };
        let mut selector = ClusterSelector::default();
        parser.skip_spaces();
        if parser.at == text.len() {
            return Ok(selector);
        }
        loop {
            let requirement = parser.requirement()?;
            let errors = requirement.validate();
            if let Some(first) = errors.into_iter().next() {
                return Err(first);
            }
            selector.match_expressions.push(requirement);
            parser.skip_spaces();
            if parser.at == text.len() {
                return Ok(selector);
            }
            parser.expect(",")?;
        }
    }
}

struct SelectorParser<'a> {
    text: &'a str,
    at: usize,
}

impl SelectorParser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_spaces(&mut self) {
        let trimmed = self.rest().trim_start();
        self.at = self.text.len() - trimmed.len();
    }

    fn error(&self, why: impl Into<String>) -> SelectorError {
        SelectorError::Syntax {
            selector: self.text.to_owned(),
            position: self.at,
            why: why.into(),
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), SelectorError> {
        self.skip_spaces();
        if self.rest().starts_with(token) {
            self.at += token.len();
            Ok(())
        } else {
            Err(self.error(format!("expected {token:?}")))
        }
    }

    fn word(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let len = self
            .rest()
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | '=' | '!'))
            .unwrap_or(self.rest().len());
        if len == 0 {
            return Err(self.error("expected a label key or value"));
        }
        let word = self.rest()[..len].to_owned();
        self.at += len;
        Ok(word)
    }

    fn requirement(&mut self) -> Result<LabelRequirement, SelectorError> {
        self.skip_spaces();
        if self.rest().starts_with('!') {
            self.at += 1;
            let key = self.word()?;
            return Ok(LabelRequirement {
                key,
                operator: Operator::DoesNotExist,
                values: vec![],
            });
        }
        let key = self.word()?;
        self.skip_spaces();
        let rest = self.rest();
        if rest.is_empty() || rest.starts_with(',') {
            return Ok(LabelRequirement {
                key,
                operator: Operator::Exists,
                values: vec![],
            });
        }
        for (token, operator) in [
            ("==", Operator::In),
            ("!=", Operator::NotIn),
            ("=", Operator::In),
        ] {
            if rest.starts_with(token) {
                self.at += token.len();
                let value = self.value()?;
                return Ok(LabelRequirement {
                    key,
                    operator,
                    values: vec![value],
                });
            }
        }
        let operator = match self.word()?.as_str() {
            "in" => Operator::In,
            "notin" => Operator::NotIn,
            other => {
                return Err(self.error(format!(
                    "unknown operator {other:?} (use =, ==, !=, in, notin)"
                )))
            }
        };
        self.expect("(")?;
        let mut values = Vec::new();
        loop {
            values.push(self.value()?);
            self.skip_spaces();
            if self.rest().starts_with(')') {
                self.at += 1;
                return Ok(LabelRequirement {
                    key,
                    operator,
                    values,
                });
            }
            self.expect(",")?;
        }
    }

    fn value(&mut self) -> Result<String, SelectorError> {
        self.skip_spaces();
        let len = self
            .rest()
            .find(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')'))
            .unwrap_or(self.rest().len());
        if len == 0 {
            return Err(self.error("expected a value"));
        }
        let value = self.rest()[..len].to_owned();
        self.at += len;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use expect_test::{expect, Expect};

    use super::*;

    fn check_parse(input: &str, expect: Expect) {
        let actual = match ClusterSelector::parse_labels(input) {
            Ok(selector) => selector
                .match_expressions
                .iter()
                .map(|r| format!("{} {} {:?}", r.key, r.operator, r.values))
                .collect::<Vec<_>>()
                .join("; "),
            Err(err) => format!("error: {err}"),
        };
        expect.assert_eq(&actual);
    }

    #[test]
    fn string_syntax() {
        check_parse("", expect![""]);
        check_parse("env=prod", expect![[r#"env In ["prod"]"#]]);
        check_parse(
            "env in (prod, stage), !legacy, tier, region!=us",
            expect![[
                r#"env In ["prod", "stage"]; legacy DoesNotExist []; tier Exists []; region NotIn ["us"]"#
            ]],
        );
        check_parse(
            "fleetscope.io/channel notin (canary)",
            expect![[r#"fleetscope.io/channel NotIn ["canary"]"#]],
        );
        check_parse(
            "env in ()",
            expect![[r#"error: selector "env in ()": expected a value at position 8"#]],
        );
        check_parse(
            "env in (a b)",
            expect![[r#"error: selector "env in (a b)": expected "," at position 10"#]],
        );
        check_parse(
            "env ~ prod",
            expect![[
                r#"error: selector "env ~ prod": unknown operator "~" (use =, ==, !=, in, notin) at position 5"#
            ]],
        );
        check_parse(
            "Env!=x y",
            expect![[r#"error: selector "Env!=x y": expected "," at position 7"#]],
        );
        check_parse(
            "-env=prod",
            expect![[
                r#"error: label key "-env" is invalid: must start and end with a letter or digit"#
            ]],
        );
        check_parse(
            "env=pr*d",
            expect![[
                r#"error: label value "pr*d" for key "env" is invalid: only letters, digits, '-', '_' and '.' are allowed"#
            ]],
        );
        check_parse(
            ",",
            expect![[r#"error: selector ",": expected a label key or value at position 0"#]],
        );
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn matching() {
        let berlin = GroupPath::parse("emea/de/berlin").unwrap();
        let prod = labels(&[("env", "prod"), ("tier", "gold")]);
        let mut selector =
            ClusterSelector::parse_labels("env in (prod,stage), !legacy, tier").unwrap();
        assert!(selector.matches(&prod, &berlin));
        assert!(
            !selector.matches(&labels(&[("env", "prod")]), &berlin),
            "tier must exist"
        );
        assert!(!selector.matches(
            &labels(&[("env", "prod"), ("tier", "x"), ("legacy", "")]),
            &berlin
        ));
        selector.groups = vec![GroupPath::parse("emea/fr").unwrap()];
        assert!(!selector.matches(&prod, &berlin), "outside the subtree");
        selector.groups.push(GroupPath::parse("emea/de").unwrap());
        assert!(
            selector.matches(&prod, &berlin),
            "inside the second subtree"
        );
        assert!(
            ClusterSelector::default().matches(&Labels::new(), &berlin),
            "empty selector matches all"
        );
        let not_in = ClusterSelector::parse_labels("env notin (prod)").unwrap();
        assert!(
            not_in.matches(&Labels::new(), &berlin),
            "NotIn matches a missing key"
        );
        assert!(!not_in.matches(&prod, &berlin));
    }

    #[test]
    fn structured_validation_reports_everything() {
        let selector: ClusterSelector = serde_json::from_str(
            r#"{"matchLabels": {"Bad Key": "x", "env": "-prod"},
                "matchExpressions": [{"key": "tier", "operator": "In"},
                                     {"key": "edge", "operator": "Exists", "values": ["y"]}]}"#,
        )
        .unwrap();
        let messages: Vec<String> = selector
            .validate()
            .iter()
            .map(ToString::to_string)
            .collect();
        expect![[r#"
            [
                "label key \"Bad Key\" is invalid: only letters, digits, '-', '_' and '.' are allowed",
                "label value \"-prod\" for key \"env\" is invalid: must start and end with a letter or digit",
                "selector requirement on \"tier\": operator In needs at least one value",
                "selector requirement on \"edge\": operator Exists takes no values",
            ]
        "#]]
        .assert_debug_eq(&messages);
        let unknown = serde_json::from_str::<ClusterSelector>(r#"{"matchLabel": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("unknown field `matchLabel`"), "{unknown}");
        let bad_group = serde_json::from_str::<ClusterSelector>(r#"{"groups": ["emea//de"]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            bad_group.contains(r#"group path "emea//de""#),
            "{bad_group}"
        );
    }
}
