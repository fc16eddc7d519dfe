//! The documentation's commands against the binary: every `fleetscope <subcommand> ... --flag`
//! written in the README, ARCHITECTURE.md, docs/ and the Kubernetes README must name a flag
//! that subcommand has, and every `FLEETSCOPE_*` environment variable they mention must be one
//! the binary reads (or, for benchmarks and provisioning files, one the project uses). The
//! Kubernetes manifests are read the same way: their containers' arguments, and their
//! comments, where a flag must be one of the component the comment speaks of. The newest
//! migration the docs name is the store's. A renamed or removed flag, or a new migration, fails
//! here instead of in a reader's terminal.

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

/// The Kubernetes manifests a reader copies: every YAML file under deploy/kubernetes/ except the
/// prometheus-operator's CRDs vendored for the tests (`testdata/`).
fn manifests() -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "testdata" && name != "target" {
                    walk(&path, found);
                }
            } else if name.ends_with(".yaml") || name.ends_with(".yml") {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&root().join("deploy/kubernetes"), &mut found);
    found.sort();
    assert!(found.len() > 15, "manifests: {found:?}");
    found
}

/// A YAML line's comment: what follows a `#` that starts the line or follows a space or a tab
/// (a `#` inside a word, as in a link's fragment, starts none). The lines of block scalars
/// count as well: the scripts and the token file the manifests carry comment the same way.
fn comment(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    (0..bytes.len())
        .find(|&at| {
            bytes[at] == b'#' && (at == 0 || bytes[at - 1] == b' ' || bytes[at - 1] == b'\t')
        })
        .map(|at| &line[at + 1..])
}

/// A manifest's comments in blocks, each line with its number: consecutive lines holding
/// nothing but a comment are one block; a comment after a value is a block of its own.
fn comment_blocks(text: &str) -> Vec<Vec<(usize, &str)>> {
    let mut blocks: Vec<Vec<(usize, &str)>> = Vec::new();
    let mut open = false;
    for (n, line) in text.lines().enumerate() {
        let Some(comment) = comment(line) else {
            open = false;
            continue;
        };
        let alone = line.trim_start().starts_with('#');
        if !(alone && open) {
            blocks.push(Vec::new());
        }
        blocks.last_mut().unwrap().push((n + 1, comment));
        open = alone;
    }
    blocks
}

/// The subcommands a text speaks of by their components' names: `the hub's`, `collectors`,
/// `the renderer`, `migrations`.
fn components_named(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(|word| {
            let word = word.to_ascii_lowercase();
            let stem = word.strip_suffix('s').unwrap_or(&word);
            let command = match stem {
                "hub" => "hub",
                "collector" => "collector",
                "agent" => "agent",
                "render" | "renderer" => "render",
                "migrate" | "migration" => "migrate",
                _ => return None,
            };
            Some(command.to_owned())
        })
        .collect()
}

/// The argument lists of a manifest's containers (`args:` and the `- item` lines under it),
/// each item with its line number, comments left out.
fn arg_lists(text: &str) -> Vec<Vec<(usize, String)>> {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let mut lists = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if line.trim() != "args:" {
            continue;
        }
        let mut items = Vec::new();
        let mut item_indent = None;
        for (n, next) in lines.iter().enumerate().skip(at + 1) {
            let trimmed = next.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let Some(item) = trimmed.strip_prefix("- ") else {
                break;
            };
            let here = indent(next);
            if here < indent(line) || item_indent.is_some_and(|i| i != here) {
                break;
            }
            item_indent = Some(here);
            let item = item.split(" #").next().unwrap().trim();
            items.push((
                n + 1,
                item.trim_matches(|c| c == '"' || c == '\'').to_owned(),
            ));
        }
        lists.push(items);
    }
    lists
}

/// Each subcommand's flags, from the binary's help (nested subcommands' flags with their
/// parent's).
fn known_flags() -> BTreeMap<String, BTreeSet<String>> {
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
    known
}

/// Every `fleetscope <subcommand> ...` in `text` whose subcommand is in `known`, with the flags
/// its command line gives.
fn command_lines(
    text: &str,
    known: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<(String, BTreeSet<String>)> {
    let mut found = Vec::new();
    let mut rest = text;
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
        if glued || !known.contains_key(command) {
            continue;
        }
        found.push((command.to_owned(), flags(command_text(after))));
    }
    found
}

/// What is wrong with the flags of the manifests: their containers' arguments must be flags of
/// the subcommand they start with; in a comment, a `fleetscope <subcommand>` command line, or a
/// code span starting with a subcommand (`render --every 60`), must give that subcommand's
/// flags, and any other flag must be one of a component the comment block names (`the hub's
/// --stale-after`), or, when it names none, of a subcommand the file's containers run, or, in
/// a file without any, of some subcommand. Returns the flags checked and the problems.
fn manifest_flags(known: &BTreeMap<String, BTreeSet<String>>) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut wrong = Vec::new();
    let all: BTreeSet<String> = known.keys().cloned().collect();
    for file in manifests() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        let mut runs = BTreeSet::new();
        for list in arg_lists(&text) {
            let Some((_, command)) = list.first().filter(|(_, c)| known.contains_key(c)) else {
                continue;
            };
            runs.insert(command.clone());
            for (line, item) in &list[1..] {
                if !item.starts_with("--") {
                    continue;
                }
                let flag = item.split('=').next().unwrap();
                checked += 1;
                if !known[command].contains(flag) {
                    wrong.push(format!(
                        "{name}:{line}: the container runs `fleetscope {command}`, which has no {flag}"
                    ));
                }
            }
        }
        for block in comment_blocks(&text) {
            let joined: Vec<&str> = block.iter().map(|(_, comment)| *comment).collect();
            let named = components_named(&joined.join(" "));
            let (about, whose) = if !named.is_empty() {
                (named, "the comment names")
            } else if !runs.is_empty() {
                (runs.clone(), "the file runs")
            } else {
                (all.clone(), "there are")
            };
            for (line, comment) in block {
                let mut explicit = Vec::new();
                explicit.extend(command_lines(comment, known));
                for span in comment.split('`').skip(1).step_by(2) {
                    if let Some(command) = span.split_whitespace().next() {
                        if known.contains_key(command) {
                            explicit.push((command.to_owned(), flags(span)));
                        }
                    }
                }
                let mut given = BTreeSet::new();
                for (command, flags) in explicit {
                    for flag in flags {
                        checked += 1;
                        if !known[&command].contains(&flag) {
                            wrong.push(format!(
                                "{name}:{line}: `{command}` in a comment has no {flag}"
                            ));
                        }
                        given.insert(flag);
                    }
                }
                for flag in flags(comment).difference(&given) {
                    checked += 1;
                    if !about.iter().any(|command| known[command].contains(flag)) {
                        wrong.push(format!(
                            "{name}:{line}: a comment gives {flag}, a flag of none of the subcommands {whose} ({})",
                            about.iter().cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
            }
        }
    }
    (checked, wrong)
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
    let known = known_flags();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (line, joined) in logical_lines(&text) {
            for (command, flags) in command_lines(&joined, &known) {
                for flag in flags {
                    checked += 1;
                    if !known[&command].contains(&flag) {
                        wrong.push(format!(
                            "{name}:{line}: `fleetscope {command}` has no {flag}"
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} flags found in the docs");
    let (in_manifests, manifests_wrong) = manifest_flags(&known);
    assert!(
        in_manifests > 30,
        "only {in_manifests} flags found in the manifests"
    );
    wrong.extend(manifests_wrong);
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
    // The manifests configure the binary itself: every variable they name, in a container's
    // environment or in a comment, is one it reads.
    for file in manifests() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            for var in words_starting(line, "FLEETSCOPE_") {
                if !read.contains(&var) {
                    wrong.push(format!("{name}:{}: {var} is not read by fleetscope", n + 1));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The newest migration the docs name (`version N is the newest`, `(latest N)`, the versions
/// a first `migrate` applies) is the store's newest, and a migration they name by number and
/// name is the store's.
#[test]
fn the_docs_name_the_store_s_migrations() {
    use fleetscope_store::schema::{latest_version, MIGRATIONS};
    let latest = latest_version();
    let all: Vec<String> = MIGRATIONS.iter().map(|m| m.version.to_string()).collect();
    let number_after = |text: &str, prefix: &str| -> Vec<u32> {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                found.push(n);
            }
        }
        found
    };
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for (line, joined) in logical_lines(&text) {
            let newest = number_after(&joined, "(latest ").into_iter().chain(
                number_after(&joined, "version ")
                    .into_iter()
                    .filter(|n| joined.contains(&format!("version {n} is the newest"))),
            );
            for n in newest {
                checked += 1;
                if n != latest {
                    wrong.push(format!(
                        "{name}:{line}: names migration {n} as the newest; the store's is {latest}"
                    ));
                }
            }
            for n in number_after(&joined, "has migration ") {
                if n <= latest {
                    wrong.push(format!(
                        "{name}:{line}: migration {n} is not newer than this build's {latest}"
                    ));
                }
            }
            if let Some(at) = joined.find("applied migrations [") {
                let list = &joined[at + "applied migrations [".len()..];
                let list = &list[..list.find(']').unwrap_or(list.len())];
                if joined.contains("already applied []") {
                    checked += 1;
                    let listed: Vec<&str> = list.split(", ").collect();
                    if listed != all {
                        wrong.push(format!(
                            "{name}:{line}: a first migrate applies [{}], not [{list}]",
                            all.join(", ")
                        ));
                    }
                }
            }
            for migration in MIGRATIONS {
                let called = format!("migration {} (", migration.version);
                if let Some(at) = joined.find(&called) {
                    let said = &joined[at + called.len()..];
                    if said.starts_with(|c: char| c.is_ascii_lowercase())
                        && !said.starts_with(&format!("{})", migration.name))
                    {
                        wrong.push(format!(
                            "{name}:{line}: migration {} is called \"{}\"",
                            migration.version, migration.name
                        ));
                    }
                }
            }
        }
    }
    assert!(
        checked >= 3,
        "only {checked} mentions of the newest migration found"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
