//! Group paths: a cluster's place in the business hierarchy (`emea/de/berlin`) and the
//! prefixes every rollup is computed over.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::{check_dns_label, IdError};

/// Why a group path was rejected. The message always quotes the whole path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GroupPathError {
    #[error("group path is empty")]
    Empty,
    #[error("group path {path:?} has an empty segment at position {index} (leading, trailing or doubled '/')")]
    EmptySegment { path: String, index: usize },
    #[error("group path {path:?} is {depth} levels deep, at most {max}")]
    TooDeep {
        path: String,
        depth: usize,
        max: usize,
    },
    #[error("group path {path:?}: {source}")]
    BadSegment { path: String, source: IdError },
}

/// A validated path in the group hierarchy: 1 to [`GroupPath::MAX_DEPTH`] segments separated by
/// `/`, each a DNS-1123 label. The fleet root has no path; rollups name it separately.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct GroupPath(String);

impl GroupPath {
    pub const MAX_DEPTH: usize = 16;
    pub const MAX_SEGMENT_LEN: usize = 63;

    pub fn parse(path: &str) -> Result<GroupPath, GroupPathError> {
        if path.is_empty() {
            return Err(GroupPathError::Empty);
        }
        let depth = path.split('/').count();
        if depth > Self::MAX_DEPTH {
            return Err(GroupPathError::TooDeep {
                path: path.to_owned(),
                depth,
                max: Self::MAX_DEPTH,
            });
        }
        for (index, segment) in path.split('/').enumerate() {
            if segment.is_empty() {
                return Err(GroupPathError::EmptySegment {
                    path: path.to_owned(),
                    index,
                });
            }
            check_dns_label("group segment", segment, Self::MAX_SEGMENT_LEN).map_err(|source| {
                GroupPathError::BadSegment {
                    path: path.to_owned(),
                    source,
                }
            })?;
        }
        Ok(GroupPath(path.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// Number of segments: `emea` is 1, `emea/de/berlin` is 3.
    pub fn depth(&self) -> usize {
        self.segments().count()
    }

    pub fn parent(&self) -> Option<GroupPath> {
        self.0
            .rfind('/')
            .map(|at| GroupPath(self.0[..at].to_owned()))
    }

    /// Every ancestor and the path itself, shortest first:
    /// `emea/de/berlin` gives `emea`, `emea/de`, `emea/de/berlin`.
    pub fn prefixes(&self) -> Vec<GroupPath> {
        let mut out = Vec::with_capacity(self.depth());
        for (at, _) in self.0.match_indices('/') {
            out.push(GroupPath(self.0[..at].to_owned()));
        }
        out.push(self.clone());
        out
    }

    /// True when `self` is `ancestor` or lies below it. Segment-wise, so `emea/de` is not
    /// inside `emea/d`.
    pub fn is_within(&self, ancestor: &GroupPath) -> bool {
        self.0 == ancestor.0
            || (self.0.len() > ancestor.0.len()
                && self.0.starts_with(&ancestor.0)
                && self.0.as_bytes()[ancestor.0.len()] == b'/')
    }

    pub fn child(&self, segment: &str) -> Result<GroupPath, GroupPathError> {
        GroupPath::parse(&format!("{}/{}", self.0, segment))
    }
}

impl TryFrom<String> for GroupPath {
    type Error = GroupPathError;
    fn try_from(value: String) -> Result<Self, GroupPathError> {
        GroupPath::parse(&value)
    }
}

impl From<GroupPath> for String {
    fn from(value: GroupPath) -> String {
        value.0
    }
}

impl std::str::FromStr for GroupPath {
    type Err = GroupPathError;
    fn from_str(value: &str) -> Result<Self, GroupPathError> {
        GroupPath::parse(value)
    }
}

impl fmt::Display for GroupPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use expect_test::{expect, Expect};

    use super::*;

    fn check(input: &str, expect: Expect) {
        let actual = match GroupPath::parse(input) {
            Ok(path) => {
                let prefixes: Vec<String> = path.prefixes().into_iter().map(String::from).collect();
                format!(
                    "depth {} prefixes {:?} parent {:?}",
                    path.depth(),
                    prefixes,
                    path.parent().map(String::from)
                )
            }
            Err(err) => format!("error: {err}"),
        };
        expect.assert_eq(&actual);
    }

    #[test]
    fn parse_and_prefixes() {
        check(
            "emea",
            expect![[r#"depth 1 prefixes ["emea"] parent None"#]],
        );
        check(
            "emea/de/berlin",
            expect![[
                r#"depth 3 prefixes ["emea", "emea/de", "emea/de/berlin"] parent Some("emea/de")"#
            ]],
        );
        check("", expect!["error: group path is empty"]);
        check(
            "/emea",
            expect![[
                r#"error: group path "/emea" has an empty segment at position 0 (leading, trailing or doubled '/')"#
            ]],
        );
        check(
            "emea//de",
            expect![[
                r#"error: group path "emea//de" has an empty segment at position 1 (leading, trailing or doubled '/')"#
            ]],
        );
        check(
            "emea/",
            expect![[
                r#"error: group path "emea/" has an empty segment at position 1 (leading, trailing or doubled '/')"#
            ]],
        );
        check(
            "emea/Berlin",
            expect![[
                r#"error: group path "emea/Berlin": group segment "Berlin" has 'B' at position 0; allowed are lowercase letters a-z, digits 0-9 and '-'"#
            ]],
        );
        check(
            "emea/münchen",
            expect![[
                r#"error: group path "emea/münchen": group segment "münchen" has 'ü' at position 1; allowed are lowercase letters a-z, digits 0-9 and '-'"#
            ]],
        );
        check(
            "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q",
            expect![[
                r#"error: group path "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q" is 17 levels deep, at most 16"#
            ]],
        );
    }

    #[test]
    fn within_is_segment_wise() {
        let p = |s: &str| GroupPath::parse(s).unwrap();
        assert!(p("emea/de/berlin").is_within(&p("emea")));
        assert!(p("emea/de").is_within(&p("emea/de")));
        assert!(!p("emea/de").is_within(&p("emea/d")));
        assert!(!p("emea").is_within(&p("emea/de")));
        assert!(!p("emeax").is_within(&p("emea")));
    }
}
