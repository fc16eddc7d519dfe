//! The rules on modules and their size (ARCHITECTURE.md, "Boundaries"), checked on the sources
//! of every workspace crate:
//!
//! - no module imports a module that imports it back, directly or through others (a module and
//!   the modules inside it count as one: a parent declares and re-exports its children, and
//!   children use their parent);
//! - no source file outside tests runs to more than 1,000 lines;
//! - no function outside tests runs to 150 lines or more.
//!
//! The sources are read as text, which is enough for what is checked: comments, string and
//! character literals are blanked first, a module's imports are the `crate::` and `super::`
//! paths it names, and `#[cfg(test)] mod name { … }` blocks are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::repo_root;

/// The longest source file allowed outside tests.
const MAX_FILE_LINES: usize = 1_000;
/// The length at which a function outside tests is too long.
const TOO_LONG_FUNCTION: usize = 150;

/// One crate's modules: path (`fleet::records`) to the file's source, blanked.
struct Crate {
    dir: PathBuf,
    modules: BTreeMap<String, (PathBuf, String)>,
}

/// Every crate of the workspace with a `src` folder, its sources read and blanked.
fn crates() -> Vec<Crate> {
    let mut manifests = Vec::new();
    find_manifests(&repo_root(), &mut manifests);
    let mut crates: Vec<Crate> = manifests
        .into_iter()
        .filter_map(|dir| {
            let src = dir.join("src");
            src.is_dir().then(|| Crate {
                modules: modules_of(&src),
                dir,
            })
        })
        .collect();
    crates.sort_by(|a, b| a.dir.cmp(&b.dir));
    assert!(
        crates.len() >= 10 && crates.iter().any(|c| c.dir.ends_with("engine")),
        "found only {} crates",
        crates.len()
    );
    crates
}

/// `path` from the workspace's root, as a failure names it.
fn relative(path: &Path) -> String {
    path.strip_prefix(repo_root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Folders holding a `Cargo.toml`, below `dir`, build output and hidden folders left out.
fn find_manifests(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.join("Cargo.toml").is_file() {
        out.push(dir.to_path_buf());
    }
    for entry in std::fs::read_dir(dir).expect("read a folder") {
        let path = entry.expect("a folder entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() && !name.starts_with('.') && name != "target" && name != "node_modules" {
            find_manifests(&path, out);
        }
    }
}

/// The modules under `src`, by their path in the crate.
fn modules_of(src: &Path) -> BTreeMap<String, (PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let relative = file
                .strip_prefix(src)
                .expect("under src")
                .with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&file).expect("read a source file");
            (parts.join("::"), (file, blank(&text)))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a folder") {
        let path = entry.expect("a folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `text` with comments and the insides of string and character literals replaced by spaces
/// (newlines kept, so lines still count).
fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_lines = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let rest = &chars[i..];
        if rest.starts_with(&['/', '/']) {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if rest.starts_with(&['/', '*']) {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i..].starts_with(&['/', '*']) {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i..].starts_with(&['*', '/']) {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep_lines(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br"…": up to the quote followed by as many hashes.
            let open = chars[i..].iter().position(|&c| c == '"').expect("a quote") + 1;
            out.push_str(&" ".repeat(open));
            i += open;
            while i < chars.len() {
                if chars[i] == '"'
                    && chars[i + 1..].iter().take_while(|&&c| c == '#').count() >= hashes
                {
                    out.push_str(&" ".repeat(hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(keep_lines(chars[i]));
                i += 1;
            }
        } else if chars[i] == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let width = if chars[i] == '\\' { 2 } else { 1 };
                for c in &chars[i..(i + width).min(chars.len())] {
                    out.push(keep_lines(*c));
                }
                i += width;
            }
            out.push('"');
            i += 1;
        } else if let Some(width) = char_literal(&chars, i) {
            out.push_str(&" ".repeat(width));
            i += width;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// The number of hashes of a raw string literal starting at `i`, if one does.
fn raw_string_start(chars: &[char], i: usize) -> Option<usize> {
    if i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_') {
        return None;
    }
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|&&c| c == '#').count();
    (chars.get(j + hashes) == Some(&'"')).then_some(hashes)
}

/// The width of a character literal starting at `i` (`'a'`, `'\n'`, `'\u{1F600}'`), if one
/// does; a lifetime (`'a`) is none.
fn char_literal(chars: &[char], i: usize) -> Option<usize> {
    if chars[i] != '\'' {
        return None;
    }
    match chars.get(i + 1)? {
        '\\' => {
            let end = chars[i + 2..].iter().position(|&c| c == '\'')?;
            (end <= 10).then_some(end + 3)
        }
        _ => (chars.get(i + 2) == Some(&'\'')).then_some(3),
    }
}

/// `text` without its inline test modules (`#[cfg(test)] mod name { … }`).
fn without_test_modules(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let inline_module = after.starts_with("mod ")
            && after
                .find(['{', ';'])
                .is_some_and(|end| after.as_bytes()[end] == b'{');
        out.push_str(&rest[..at]);
        if !inline_module {
            out.push_str("#[cfg(test)]");
            rest = &rest[at + "#[cfg(test)]".len()..];
            continue;
        }
        let open = rest.len() - after.len() + after.find('{').expect("a brace");
        let close = matching_brace(rest, open);
        out.push_str(&"\n".repeat(rest[at..close].matches('\n').count()));
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// The index just past the brace that closes the one at `open`.
fn matching_brace(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, b) in text.bytes().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// The modules `module` names through `crate::` and `super::` paths, by the longest module
/// path each names; its own ancestors and descendants are left out.
fn imports(module: &str, text: &str, modules: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut parent: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    parent.pop();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        for (at, _) in text.match_indices(prefix) {
            if at > 0 && text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
            {
                continue;
            }
            let mut path: Vec<&str> = text[at + prefix.len()..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .collect();
            let mut base = base.clone();
            while path.first() == Some(&"super") {
                path.remove(0);
                base.pop();
            }
            let named = (1..=path.len()).rev().find_map(|n| {
                let mut full = base.clone();
                full.extend(&path[..n]);
                let full = full.join("::");
                modules.contains(full.as_str()).then_some(full)
            });
            if let Some(named) = named {
                let related = named == module
                    || module.starts_with(&format!("{named}::"))
                    || named.starts_with(&format!("{module}::"))
                    || module.is_empty()
                    || named.is_empty();
                if !related {
                    found.insert(named);
                }
            }
        }
    }
    found
}

/// The import cycles among `graph`'s modules: each a strongly connected set of two or more.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Two modules are on a cycle when each reaches the other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(m) = stack.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for (m, r) in &reaches {
        if done.contains(*m) || !r.contains(*m) {
            continue;
        }
        let set: Vec<String> = r
            .iter()
            .filter(|other| reaches.get(other).is_some_and(|o| o.contains(*m)))
            .cloned()
            .collect();
        done.extend(set.iter().cloned());
        found.push(set);
    }
    found
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut broken = Vec::new();
    let mut edges = 0;
    for krate in crates() {
        let names: BTreeSet<&str> = krate.modules.keys().map(String::as_str).collect();
        let graph: BTreeMap<String, BTreeSet<String>> = krate
            .modules
            .iter()
            .map(|(module, (_, text))| {
                let code = without_test_modules(text);
                (module.clone(), imports(module, &code, &names))
            })
            .collect();
        edges += graph.values().map(BTreeSet::len).sum::<usize>();
        for cycle in cycles(&graph) {
            broken.push(format!("{}: {}", relative(&krate.dir), cycle.join(" ↔ ")));
        }
    }
    assert!(edges > 100, "only {edges} imports between modules found");
    assert!(
        broken.is_empty(),
        "modules that import each other:\n{}",
        broken.join("\n")
    );
}

#[test]
fn no_source_file_outside_tests_runs_past_a_thousand_lines() {
    let too_long: Vec<String> = crates()
        .iter()
        .flat_map(|k| k.modules.values())
        .filter_map(|(file, text)| {
            let lines = without_test_modules(text).trim_end().lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{}: {lines} lines", relative(file)))
        })
        .collect();
    assert!(
        too_long.is_empty(),
        "files over {MAX_FILE_LINES} lines outside tests:\n{}",
        too_long.join("\n")
    );
}

/// Every function of `text` with its first line and its length in lines.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(at) = line.find("fn ") else { continue };
        if at > 0 && line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let name: String = line[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body: from the first `{` (unless a `;` ends a declaration first) to its match.
        let mut depth = 0i32;
        let mut started = false;
        let mut end = None;
        'lines: for (j, l) in lines.iter().enumerate().skip(i) {
            let from = if j == i { at } else { 0 };
            for c in l[from..].chars() {
                match c {
                    '{' => {
                        depth += 1;
                        started = true;
                    }
                    '}' => depth -= 1,
                    ';' if !started && depth == 0 => break 'lines,
                    _ => {}
                }
                if started && depth == 0 {
                    end = Some(j);
                    break 'lines;
                }
            }
        }
        if let Some(end) = end {
            found.push((name, i + 1, end - i + 1));
        }
    }
    found
}

#[test]
fn no_function_outside_tests_runs_to_150_lines() {
    let mut seen = 0;
    let too_long: Vec<String> = crates()
        .iter()
        .flat_map(|k| k.modules.values())
        .flat_map(|(file, text)| {
            let found = functions(&without_test_modules(text));
            seen += found.len();
            found
                .into_iter()
                .filter(|(_, _, lines)| *lines >= TOO_LONG_FUNCTION)
                .map(move |(name, line, lines)| {
                    format!("{}:{line}: {name}, {lines} lines", relative(file))
                })
        })
        .collect();
    assert!(seen > 1_000, "only {seen} functions found");
    assert!(
        too_long.is_empty(),
        "functions of {TOO_LONG_FUNCTION} lines or more outside tests:\n{}",
        too_long.join("\n")
    );
}

#[test]
fn the_reader_finds_cycles_long_files_and_long_functions() {
    let modules: BTreeSet<&str> = ["a", "b", "c", "c::d"].into_iter().collect();
    let a = "use crate::b::Thing; // crate::c::Other\nlet s = \"crate::c\";";
    assert_eq!(
        imports("a", &blank(a), &modules),
        BTreeSet::from(["b".to_owned()])
    );
    let d = "use super::super::a;\nuse super::Parent;";
    assert_eq!(
        imports("c::d", &blank(d), &modules),
        BTreeSet::from(["a".to_owned()])
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("c::d", vec![]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        cycles(&graph),
        vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]
    );
    let long = format!(
        "fn long() {{\n{}}}\n#[cfg(test)]\nmod tests {{\n    fn x() {{}}\n}}\n",
        "    let x = '{';\n".repeat(160)
    );
    let code = without_test_modules(&blank(&long));
    assert_eq!(functions(&code), vec![("long".to_owned(), 1, 162)]);
}
