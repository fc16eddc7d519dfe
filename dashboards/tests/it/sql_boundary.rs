//! Only the store writes SQL: no string literal in this crate's sources holds a SQL statement's
//! keywords. The dashboards take their statements from `fleetscope_store::panel_sql` and put in
//! only Grafana's variables and the plugin's macros; a statement written here would be one the
//! store's tests never run and one that can drift from the store's own queries.

use std::path::Path;

/// Keywords that only a statement has, written as the store writes them (upper case, whole
/// words), so that panel descriptions in plain English do not match.
const KEYWORDS: &[&str] = &[
    "SELECT", "FROM", "WHERE", "PREWHERE", "JOIN", "GROUP BY", "ORDER BY", "LIMIT", "UNION",
    "HAVING", "DISTINCT", "INSERT",
];

/// One string literal: the line it starts on and its text as written (escapes not decoded).
#[derive(Debug, PartialEq, Eq)]
struct Literal {
    line: usize,
    text: String,
}

/// The string literals of Rust source text, comments and character literals skipped. Plain,
/// byte and raw strings are all found; a lifetime (`'a`) is not taken for a character.
fn string_literals(source: &str) -> Vec<Literal> {
    let chars: Vec<char> = source.chars().collect();
    let mut literals = Vec::new();
    let mut line = 1;
    let mut at = 0;
    let count_lines =
        |from: usize, to: usize| chars[from..to].iter().filter(|c| **c == '\n').count();
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let start = at;
            at += 2;
            while at < chars.len() && !(chars[at] == '*' && chars.get(at + 1) == Some(&'/')) {
                at += 1;
            }
            at = (at + 2).min(chars.len());
            line += count_lines(start, at);
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && !is_ident(chars.get(at.wrapping_sub(1)))
        {
            let mut hashes = 0;
            let mut open = at + 1;
            while chars.get(open) == Some(&'#') {
                hashes += 1;
                open += 1;
            }
            if chars.get(open) != Some(&'"') {
                at += 1;
                continue;
            }
            let body = open + 1;
            let mut end = body;
            while end < chars.len()
                && !(chars[end] == '"' && (1..=hashes).all(|i| chars.get(end + i) == Some(&'#')))
            {
                end += 1;
            }
            literals.push(Literal {
                line,
                text: chars[body..end].iter().collect(),
            });
            line += count_lines(at, end);
            at = (end + 1 + hashes).min(chars.len());
        } else if c == '"' {
            let body = at + 1;
            let mut end = body;
            while end < chars.len() && chars[end] != '"' {
                end += if chars[end] == '\\' { 2 } else { 1 };
            }
            let end = end.min(chars.len());
            literals.push(Literal {
                line,
                text: chars[body..end].iter().collect(),
            });
            line += count_lines(at, end);
            at = end + 1;
        } else if c == '\'' {
            // A character literal is `'x'` or an escape; anything else is a lifetime or label.
            if next == Some('\\') {
                at += 3;
                while at < chars.len() && chars[at] != '\'' {
                    at += 1;
                }
                at += 1;
            } else if chars.get(at + 2) == Some(&'\'') {
                at += 3;
            } else {
                at += 1;
            }
        } else {
            if c == '\n' {
                line += 1;
            }
            at += 1;
        }
    }
    literals
}

fn is_ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The keywords `text` holds as whole words, with the line (counted from `first_line`) of each.
fn keywords_in(text: &str, first_line: usize) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for keyword in KEYWORDS {
        for (at, _) in text.match_indices(keyword) {
            let before = text[..at].chars().next_back();
            let after = text[at + keyword.len()..].chars().next();
            if !is_ident(before.as_ref()) && !is_ident(after.as_ref()) {
                found.push((first_line + text[..at].matches('\n').count(), *keyword));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_scanner_finds_keywords_in_literals_only() {
    let source = r##"
// SELECT in a comment
/* FROM in a block
   comment */
fn f<'a>(x: &'a str) -> char {
    let _ = "the group, from the store";
    let _ = "SELECT app \
FROM pairs";
    let _ = r#"a "raw" GROUP BY"#;
    let _ = b"ORDER BY";
    let _ = "LIMITS and SELECTED";
    '"'
}
"##;
    let literals = string_literals(source);
    let found: Vec<(usize, &str)> = literals
        .iter()
        .flat_map(|literal| keywords_in(&literal.text, literal.line))
        .collect();
    assert_eq!(
        found,
        vec![
            (7, "SELECT"),
            (8, "FROM"),
            (9, "GROUP BY"),
            (10, "ORDER BY")
        ]
    );
    assert_eq!(literals.len(), 5, "{literals:?}");
}

#[test]
fn no_sql_is_written_in_the_dashboards_sources() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("reading {}: {err}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the sources: {files:?}");
    let mut literals = 0;
    let mut offences = Vec::new();
    for path in &files {
        let source = std::fs::read_to_string(path)
            .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
        for literal in string_literals(&source) {
            literals += 1;
            for (line, keyword) in keywords_in(&literal.text, literal.line) {
                offences.push(format!(
                    "dashboards/src/{}:{line}: `{keyword}` in a string literal",
                    path.file_name().expect("a file name").to_string_lossy()
                ));
            }
        }
    }
    assert!(literals > 200, "only {literals} string literals found");
    assert!(
        offences.is_empty(),
        "SQL belongs in the store (fleetscope_store::panel_sql); the dashboards put in Grafana's variables and macros only:\n{}",
        offences.join("\n")
    );
}
