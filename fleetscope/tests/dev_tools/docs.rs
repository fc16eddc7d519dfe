//! The documentation's commands against the binary: every `fleetscope <subcommand> ... --flag`
//! written in the README, ARCHITECTURE.md, docs/ and the Kubernetes README must name a flag
//! that subcommand has, and every `FLEETSCOPE_*` environment variable they mention must be one
//! the binary reads (or, for benchmarks and provisioning files, one the project uses). A renamed or removed flag fails here instead of in a reader's terminal.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_fleetscope"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "fleetscope {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The names listed under `Commands:` in a help text (without `help`).
fn commands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_owned)
        .collect()
}

/// Every `--flag` a help text lists.
fn flags(help: &str) -> BTreeSet<String> {
    words_starting(help, "--")
}

/// Every maximal run of `[A-Za-z0-9_-]` starting with `prefix`, as written.
fn words_starting(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        let word: String = rest[at + prefix.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let glued = before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !word.is_empty() && !glued {
            found.insert(format!("{prefix}{word}"));
        }
        rest = &rest[at + prefix.len()..];
    }
    found
}

/// The documents a reader follows.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("deploy/kubernetes/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Lines with shell continuations (`\` at the end) joined.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        let (start, mut joined) = current.take().unwrap_or((n + 1, String::new()));
        joined.push_str(line.trim_end_matches('\\'));
        joined.push(' ');
        if line.trim_end().ends_with('\\') {
            current = Some((start, joined));
        } else {
            lines.push((start, joined));
        }
    }
    lines.extend(current);
    lines
}

/// The part of a line that belongs to one command: up to a pipe, `;`, `&&`, a shell comment,
/// the end of a code span, or a table cell's end.
fn command_text(after: &str) -> &str {
    let end = ['|', ';', '`', '#', '&']
        .iter()
        .filter_map(|c| after.find(*c))
        .min()
        .unwrap_or(after.len());
    &after[..end]
}

#[test]
fn every_flag_the_docs_give_a_subcommand_is_one_it_has() {
    let top = help(&[]);
    let mut known: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for command in commands(&top) {
        let text = help(&[&command]);
        let mut all = flags(&text);
        // Flags of nested subcommands (`render explain`) may follow the parent's.
        for nested in commands(&text) {
            all.extend(flags(&help(&[&command, &nested])));
        }
        known.insert(command, all);
    }
    assert!(known.len() >= 7, "subcommands: {:?}", known.keys());

    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (line, joined) in logical_lines(&text) {
            let mut rest = joined.as_str();
            while let Some(at) = rest.find("fleetscope ") {
                let glued = rest[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                let after = &rest[at + "fleetscope ".len()..];
                rest = after;
                let Some(command) = after.split_whitespace().next() else {
                    continue;
                };
                let Some(allowed) = known.get(command).filter(|_| !glued) else {
                    continue;
                };
                for flag in flags(command_text(after)) {
                    checked += 1;
                    if !allowed.contains(&flag) {
                        wrong.push(format!(
                            "{name}:{line}: `fleetscope {command}` has no {flag}"
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} flags found in the docs");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_environment_variable_the_docs_name_is_read_by_the_binary() {
    let top = help(&[]);
    let mut helps = top.clone();
    for command in commands(&top) {
        let text = help(&[&command]);
        for nested in commands(&text) {
            helps.push_str(&help(&[&command, &nested]));
        }
        helps.push_str(&text);
    }
    let read = words_starting(&helps, "FLEETSCOPE_");
    assert!(read.len() > 20, "{read:?}");
    // Benchmarks and Grafana's provisioning files read variables of their own: those count
    // when some file of the project other than a document uses them.
    let elsewhere = |var: &str| {
        let out = Command::new("git")
            .arg("-C")
            .arg(root())
            .args(["grep", "-q", "-w", "-F", var, "--", ".", ":!*.md"])
            .status()
            .expect("git (to search the project's files)");
        out.success()
    };
    let mut wrong = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            for var in words_starting(line, "FLEETSCOPE_") {
                if !read.contains(&var) && !elsewhere(&var) {
                    wrong.push(format!("{name}:{}: {var} is not read by fleetscope", n + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
