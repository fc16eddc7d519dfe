//! Writing the output into a Git repository with git2: the whole file set becomes one tree and,
//! when that tree differs from the branch's, one commit. Git stores content by hash, so unchanged
//! files cost nothing, and an unchanged tree writes no commit at all.

use std::collections::BTreeMap;
use std::path::Path;

use git2::{FileMode, ObjectType, Oid, Repository, Signature, Tree, TreeBuilder};

use crate::output::Files;

pub const BRANCH: &str = "refs/heads/main";

/// What a commit attempt did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitOutcome {
    /// The new commit, or `None` when the tree did not change.
    pub commit: Option<String>,
    /// The branch's commit after this (the old one when nothing changed; empty for an empty repo).
    pub head: String,
    /// Paths added, changed or removed.
    pub changed: Vec<String>,
}

/// The new content of one directory, borrowed from the rendered files.
#[derive(Default)]
struct Dir<'a> {
    files: BTreeMap<&'a str, &'a str>,
    dirs: BTreeMap<&'a str, Dir<'a>>,
}

/// Writes `dir` as a tree, starting from the branch's `old` tree at the same place: a file
/// whose content hashes to the blob already there is neither written nor re-inserted, and a
/// directory in which nothing changed keeps its old tree as it is. The work therefore follows
/// what changed, not the size of the output: a folder of 30,000 unchanged entry files costs
/// 30,000 in-memory hashes and no I/O.
fn write_dir(repo: &Repository, dir: &Dir<'_>, old: Option<&Tree<'_>>) -> Result<Oid, git2::Error> {
    let mut builder: TreeBuilder<'_> = repo.treebuilder(old)?;
    let mut changed = old.is_none();
    let old_entry = |name: &str| {
        old.and_then(|t| t.get_name(name))
            .map(|e| (e.id(), e.kind()))
    };
    for (name, content) in &dir.files {
        let oid = Oid::hash_object(ObjectType::Blob, content.as_bytes())?;
        if old_entry(name) == Some((oid, Some(ObjectType::Blob))) {
            continue;
        }
        repo.blob(content.as_bytes())?;
        builder.insert(name, oid, FileMode::Blob.into())?;
        changed = true;
    }
    for (name, sub) in &dir.dirs {
        let old_sub = match old_entry(name) {
            Some((oid, Some(ObjectType::Tree))) => Some(repo.find_tree(oid)?),
            _ => None,
        };
        let oid = write_dir(repo, sub, old_sub.as_ref())?;
        if old_sub.as_ref().map(Tree::id) != Some(oid) {
            builder.insert(name, oid, FileMode::Tree.into())?;
            changed = true;
        }
    }
    if let Some(old) = old {
        for entry in old.iter() {
            let name = entry.name().unwrap_or_default();
            if !dir.files.contains_key(name) && !dir.dirs.contains_key(name) {
                builder.remove(entry.name_bytes().to_vec())?;
                changed = true;
            }
        }
    }
    match old {
        Some(old) if !changed => Ok(old.id()),
        _ => builder.write(),
    }
}

/// Opens the repository at `path`, or creates it (non-bare, branch `main`).
pub fn open_or_init(path: &Path) -> Result<Repository, git2::Error> {
    match Repository::open(path) {
        Ok(repo) => Ok(repo),
        Err(_) => {
            let mut options = git2::RepositoryInitOptions::new();
            options.initial_head("main");
            Repository::init_opts(path, &options)
        }
    }
}

/// Makes `files` the content of branch `main`, committing only when something changed.
/// `message` gets the changed paths and returns the commit message.
pub fn commit_files(
    repo: &Repository,
    files: &Files,
    message: impl FnOnce(&[String]) -> String,
) -> Result<CommitOutcome, git2::Error> {
    let started = std::time::Instant::now();
    let mut root = Dir::default();
    for (path, content) in files {
        let mut parts: Vec<&str> = path.split('/').collect();
        let file = parts.pop().expect("paths are not empty");
        let mut dir = &mut root;
        for part in parts {
            dir = dir.dirs.entry(part).or_default();
        }
        dir.files.insert(file, content);
    }
    let parent = repo
        .find_reference(BRANCH)
        .ok()
        .and_then(|r| r.peel_to_commit().ok());
    let old_tree = parent.as_ref().map(|c| c.tree()).transpose()?;
    let tree_id = write_dir(repo, &root, old_tree.as_ref())?;
    tracing::debug!(elapsed = ?started.elapsed(), "tree written");
    let tree = repo.find_tree(tree_id)?;
    if old_tree.as_ref().is_some_and(|t| t.id() == tree_id) {
        let head = parent.map(|c| c.id().to_string()).unwrap_or_default();
        return Ok(CommitOutcome {
            commit: None,
            head,
            changed: vec![],
        });
    }
    let diff = repo.diff_tree_to_tree(old_tree.as_ref(), Some(&tree), None)?;
    let changed: Vec<String> = diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or_else(|| d.old_file().path())
                .map(|p| p.to_string_lossy().into_owned())
        })
        .collect();
    let signature = Signature::now("Fleetscope renderer", "renderer@fleetscope.invalid")?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let commit = repo.commit(
        Some(BRANCH),
        &signature,
        &signature,
        &message(&changed),
        &tree,
        &parents,
    )?;
    tracing::debug!(elapsed = ?started.elapsed(), "commit written");
    if !repo.is_bare() {
        repo.set_head(BRANCH)?;
        // Only the changed paths: checking out tens of thousands of unchanged entry files
        // costs seconds.
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout.force().remove_untracked(true);
        if parent.is_some() {
            for path in &changed {
                checkout.path(path);
            }
        }
        repo.checkout_head(Some(&mut checkout))?;
    }
    Ok(CommitOutcome {
        commit: Some(commit.to_string()),
        head: commit.to_string(),
        changed,
    })
}

/// The branch's commit, if there is one.
pub fn head_commit(repo: &Repository) -> Option<String> {
    repo.find_reference(BRANCH)
        .ok()?
        .peel_to_commit()
        .ok()
        .map(|c| c.id().to_string())
}

/// Pushes branch `main` to the remote `origin`.
pub fn push(repo: &Repository) -> Result<(), git2::Error> {
    let mut remote = repo.find_remote("origin")?;
    remote.push(&[format!("{BRANCH}:{BRANCH}")], None)
}

/// The content of a file at the branch's head, if any (used by tests and `explain`).
pub fn read_file(repo: &Repository, path: &str) -> Option<String> {
    let tree = repo
        .find_reference(BRANCH)
        .ok()?
        .peel_to_commit()
        .ok()?
        .tree()
        .ok()?;
    let entry = tree.get_path(Path::new(path)).ok()?;
    let object = entry.to_object(repo).ok()?;
    if object.kind() != Some(ObjectType::Blob) {
        return None;
    }
    String::from_utf8(object.as_blob()?.content().to_vec()).ok()
}
