//! Writing the output into a Git repository with git2: the whole file set becomes one tree and,
//! when that tree differs from the branch's, one commit. Git stores content by hash, so unchanged
//! files cost nothing, and an unchanged tree writes no commit at all.

use std::collections::BTreeMap;
use std::path::Path;

use git2::{FileMode, ObjectType, Oid, Repository, Signature, Tree, TreeBuilder};

use crate::output::{Files, RenderRecord, RENDER_RECORD};

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
    /// Subfolders taken as they are from the previous commit.
    kept: BTreeMap<&'a str, Oid>,
}

impl<'a> Dir<'a> {
    /// The folder that holds `path` (created as needed), and the path's last segment.
    fn parent_of(&mut self, path: &'a str) -> (&mut Dir<'a>, &'a str) {
        let (folders, name) = path.rsplit_once('/').unwrap_or(("", path));
        let mut dir = self;
        for part in folders.split('/').filter(|p| !p.is_empty()) {
            dir = dir.dirs.entry(part).or_default();
        }
        (dir, name)
    }
}

/// Writes `dir` as a tree, starting from the branch's `old` tree at the same place: a file
/// whose content hashes to the blob already there is neither written nor re-inserted, and a
/// directory in which nothing changed keeps its old tree as it is. The work therefore follows
/// what changed, not the size of the output: a folder of 30,000 unchanged entry files costs
/// 30,000 in-memory hashes and no I/O.
///
/// Every file path added, changed or removed on the way goes into `paths` (`prefix` is the
/// folder's path with a trailing `/`), so the commit needs no tree diff to know them.
fn write_dir(
    repo: &Repository,
    dir: &Dir<'_>,
    old: Option<&Tree<'_>>,
    prefix: &str,
    written: &mut Vec<Oid>,
    paths: &mut Vec<String>,
) -> Result<Oid, git2::Error> {
    let mut builder: TreeBuilder<'_> = repo.treebuilder(old)?;
    let mut changed = old.is_none();
    let old_entry = |name: &str| {
        old.and_then(|t| t.get_name(name))
            .map(|e| (e.id(), e.kind()))
    };
    for (name, content) in &dir.files {
        let oid = Oid::hash_object(ObjectType::Blob, content.as_bytes())?;
        match old_entry(name) {
            Some((id, Some(ObjectType::Blob))) if id == oid => continue,
            Some((id, Some(ObjectType::Tree))) => {
                file_paths(repo, id, &format!("{prefix}{name}/"), paths)?;
            }
            _ => {}
        }
        repo.blob(content.as_bytes())?;
        written.push(oid);
        builder.insert(name, oid, FileMode::Blob.into())?;
        paths.push(format!("{prefix}{name}"));
        changed = true;
    }
    for (name, sub) in &dir.dirs {
        let old_sub = match old_entry(name) {
            Some((oid, Some(ObjectType::Tree))) => Some(repo.find_tree(oid)?),
            Some(_) => {
                paths.push(format!("{prefix}{name}"));
                None
            }
            None => None,
        };
        let path = format!("{prefix}{name}/");
        let oid = write_dir(repo, sub, old_sub.as_ref(), &path, written, paths)?;
        if old_sub.as_ref().map(Tree::id) != Some(oid) {
            builder.insert(name, oid, FileMode::Tree.into())?;
            changed = true;
        }
    }
    for (name, oid) in &dir.kept {
        let old_id = old_entry(name).map(|(id, _)| id);
        if old_id != Some(*oid) {
            // Not expected (a kept folder comes from the old tree), but then both sides count.
            let path = format!("{prefix}{name}/");
            if let Some(old_id) = old_id {
                file_paths(repo, old_id, &path, paths)?;
            }
            file_paths(repo, *oid, &path, paths)?;
            builder.insert(name, *oid, FileMode::Tree.into())?;
            changed = true;
        }
    }
    if let Some(old) = old {
        for entry in old.iter() {
            let name = entry.name().unwrap_or_default();
            if !dir.files.contains_key(name)
                && !dir.dirs.contains_key(name)
                && !dir.kept.contains_key(name)
            {
                if entry.kind() == Some(ObjectType::Tree) {
                    file_paths(repo, entry.id(), &format!("{prefix}{name}/"), paths)?;
                } else {
                    paths.push(format!("{prefix}{name}"));
                }
                builder.remove(entry.name_bytes().to_vec())?;
                changed = true;
            }
        }
    }
    match old {
        Some(old) if !changed => Ok(old.id()),
        _ => {
            let oid = builder.write()?;
            written.push(oid);
            Ok(oid)
        }
    }
}

/// Every file path in the tree `id`, each after `prefix`.
fn file_paths(
    repo: &Repository,
    id: Oid,
    prefix: &str,
    paths: &mut Vec<String>,
) -> Result<(), git2::Error> {
    let tree = repo.find_tree(id)?;
    tree.walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
        if entry.kind() != Some(ObjectType::Tree) {
            paths.push(format!(
                "{prefix}{folder}{}",
                String::from_utf8_lossy(entry.name_bytes())
            ));
        }
        git2::TreeWalkResult::Ok
    })
}

/// Opens the repository at `path`, or creates it (non-bare, branch `main`).
pub fn open_or_init(path: &Path) -> Result<Repository, git2::Error> {
    // libgit2 hashes every object it reads again to verify it, with the collision-detecting
    // SHA-1, which is most of the time a render spends reading the previous commit's trees and
    // records. The output repository is written by the renderer alone, and `git fsck` (tested)
    // checks it; the setting is process-wide and the renderer is the only user of libgit2 in
    // the binary.
    git2::opts::strict_hash_verification(false);
    match Repository::open(path) {
        Ok(repo) => Ok(repo),
        Err(_) => {
            let mut options = git2::RepositoryInitOptions::new();
            options.initial_head("main");
            Repository::init_opts(path, &options)
        }
    }
}

/// The branch's tree, if there is a commit.
pub fn head_tree(repo: &Repository) -> Option<Tree<'_>> {
    repo.find_reference(BRANCH)
        .ok()?
        .peel_to_commit()
        .ok()?
        .tree()
        .ok()
}

/// The id of the tree that holds exactly `files` (path → blob id), computed in memory: the
/// bytes of each tree object are hashed as Git would store them, nothing is read or written.
fn tree_id_of(files: &BTreeMap<&str, Oid>) -> Result<Oid, git2::Error> {
    #[derive(Default)]
    struct Node<'a> {
        blobs: BTreeMap<&'a str, Oid>,
        trees: BTreeMap<&'a str, Node<'a>>,
    }
    fn hash(node: &Node<'_>) -> Result<Oid, git2::Error> {
        // Git orders entries by name, a tree's name compared as if it ended in '/'.
        let mut entries: Vec<(String, &str, Oid)> = Vec::new();
        for (name, oid) in &node.blobs {
            entries.push(((*name).to_owned(), "100644", *oid));
        }
        for (name, sub) in &node.trees {
            entries.push((format!("{name}/"), "40000", hash(sub)?));
        }
        entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut bytes = Vec::new();
        for (name, mode, oid) in entries {
            bytes.extend_from_slice(mode.as_bytes());
            bytes.push(b' ');
            bytes.extend_from_slice(name.trim_end_matches('/').as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(oid.as_bytes());
        }
        Oid::hash_object(ObjectType::Tree, &bytes)
    }
    let mut root = Node::default();
    for (path, oid) in files {
        let mut parts: Vec<&str> = path.split('/').collect();
        let name = parts.pop().unwrap_or_default();
        let mut node = &mut root;
        for part in parts {
            node = node.trees.entry(part).or_default();
        }
        node.blobs.insert(name, *oid);
    }
    hash(&root)
}

/// The previous commit's folder `path`, if it was rendered from inputs with digest `inputs`
/// and still holds exactly the files its record lists (checked by computing the tree id those
/// files make, without reading them): its tree id and the record.
pub fn reusable_folder(
    repo: &Repository,
    head: &Tree<'_>,
    path: &str,
    inputs: &str,
) -> Option<(Oid, RenderRecord)> {
    let folder = head.get_path(Path::new(path)).ok()?;
    let record_entry = head.get_path(&Path::new(path).join(RENDER_RECORD)).ok()?;
    let blob = repo.find_blob(record_entry.id()).ok()?;
    let record = RenderRecord::parse(std::str::from_utf8(blob.content()).ok()?)?;
    if record.inputs != inputs {
        return None;
    }
    let mut files: BTreeMap<&str, Oid> = BTreeMap::new();
    for (file, blob) in &record.files {
        files.insert(file.as_str(), Oid::from_str(blob).ok()?);
    }
    files.insert(RENDER_RECORD, record_entry.id());
    (tree_id_of(&files).ok()? == folder.id()).then(|| (folder.id(), record))
}

/// Makes `files` plus the `kept` folders (path → tree id, from the previous commit) the content
/// of branch `main`, committing only when something changed. `message` gets the changed paths
/// and returns the commit message.
pub fn commit_files(
    repo: &Repository,
    files: &Files,
    kept: &BTreeMap<String, Oid>,
    message: impl FnOnce(&[String]) -> String,
) -> Result<CommitOutcome, git2::Error> {
    let started = std::time::Instant::now();
    let mut root = Dir::default();
    for (path, content) in files {
        let (dir, name) = root.parent_of(path);
        dir.files.insert(name, content);
    }
    for (path, oid) in kept {
        let (dir, name) = root.parent_of(path);
        dir.kept.insert(name, *oid);
    }
    let parent = repo
        .find_reference(BRANCH)
        .ok()
        .and_then(|r| r.peel_to_commit().ok());
    let old_tree = parent.as_ref().map(|c| c.tree()).transpose()?;
    // New objects go to memory first and then into the repository as one pack: a first
    // render writes tens of thousands of objects, and one file each costs seconds of system
    // time. The branch moves only after the pack is stored.
    let odb = repo.odb()?;
    let mempack = odb.add_new_mempack_backend(1000)?;
    let mut written = Vec::new();
    let result = write_and_commit(
        repo,
        &root,
        parent.as_ref(),
        old_tree.as_ref(),
        &mut written,
        message,
        started,
    );
    let stored = result.and_then(|(outcome, commit)| {
        // Exactly the objects written here (the mempack's own dump would add every object
        // the commit reaches).
        if written.is_empty() && commit.is_none() {
            return Ok((outcome, commit));
        }
        let objects: Vec<Oid> = written.iter().chain(commit.as_ref()).copied().collect();
        if objects.len() <= LOOSE_LIMIT {
            // A few objects (a change to some apps): loose files cost less than a pack, whose
            // delta search alone takes longer than writing them.
            write_loose(repo, &odb, &objects)?;
            tracing::debug!(elapsed = ?started.elapsed(), objects = objects.len(), "loose objects written");
            return Ok((outcome, commit));
        }
        let mut builder = repo.packbuilder()?;
        for oid in &objects {
            builder.insert_object(*oid, None)?;
        }
        let mut pack = git2::Buf::new();
        builder.write_buf(&mut pack)?;
        tracing::debug!(elapsed = ?started.elapsed(), objects = written.len(), bytes = pack.len(), "pack built");
        {
            let mut writer = odb.packwriter()?;
            std::io::Write::write_all(&mut writer, &pack)
                .map_err(|err| git2::Error::from_str(&format!("writing a pack: {err}")))?;
            writer.commit()?;
        }
        Ok((outcome, commit))
    });
    mempack.reset()?;
    let (outcome, commit) = stored?;
    let Some(commit) = commit else {
        return Ok(outcome);
    };
    repo.reference(BRANCH, commit, true, "fleetscope render")?;
    tracing::debug!(elapsed = ?started.elapsed(), "pack stored, branch moved");
    if !repo.is_bare() {
        repo.set_head(BRANCH)?;
        // Only the changed paths: checking out tens of thousands of unchanged entry files
        // costs seconds.
        let mut checkout = git2::build::CheckoutBuilder::new();
        checkout.force();
        if parent.is_some() {
            // Exact paths, not patterns: no wildcard matching against every entry.
            checkout.disable_pathspec_match(true);
            for path in &outcome.changed {
                checkout.path(path);
            }
        } else {
            checkout.remove_untracked(true);
        }
        repo.checkout_head(Some(&mut checkout))?;
    }
    Ok(outcome)
}

/// Up to this many new objects are stored loose, more as one pack.
const LOOSE_LIMIT: usize = 2_000;

/// Stores `objects` (held in the in-memory backend) as loose objects in the repository's
/// object directory, as Git lays them out: `objects/<2 hex>/<38 hex>`, the zlib-compressed
/// `<type> <size>\0<content>`. Each is written to a temporary file and renamed into place, so
/// a reader never sees half an object; one already there is left alone.
fn write_loose(repo: &Repository, odb: &git2::Odb<'_>, objects: &[Oid]) -> Result<(), git2::Error> {
    let failed = |what: &str, path: &Path, err: std::io::Error| {
        git2::Error::from_str(&format!("{what} {}: {err}", path.display()))
    };
    let root = repo.path().join("objects");
    // One compressor for every object, reset in between: a new one each time allocates and
    // clears its tables, which cost more than compressing a small object.
    let mut compress = flate2::Compress::new(flate2::Compression::default(), true);
    for oid in objects {
        let hex = oid.to_string();
        let dir = root.join(&hex[..2]);
        let path = dir.join(&hex[2..]);
        if path.exists() {
            continue;
        }
        let object = odb.read(*oid)?;
        let mut raw = format!("{} {}\0", object.kind().str(), object.len()).into_bytes();
        raw.extend_from_slice(object.data());
        let bytes = zlib(&mut compress, &raw)
            .map_err(|err| failed("compressing", &path, std::io::Error::other(err.to_string())))?;
        std::fs::create_dir_all(&dir).map_err(|err| failed("creating", &dir, err))?;
        let temporary = dir.join(format!("tmp_obj_{hex}"));
        std::fs::write(&temporary, bytes).map_err(|err| failed("writing", &temporary, err))?;
        std::fs::rename(&temporary, &path).map_err(|err| failed("renaming", &path, err))?;
    }
    Ok(())
}

/// `raw` as one zlib stream, with `compress` reset first.
fn zlib(compress: &mut flate2::Compress, raw: &[u8]) -> Result<Vec<u8>, flate2::CompressError> {
    compress.reset();
    let mut out = Vec::with_capacity(raw.len() / 2 + 64);
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(64));
        }
        let consumed = usize::try_from(compress.total_in()).unwrap_or(usize::MAX);
        let input = raw.get(consumed..).unwrap_or_default();
        if compress.compress_vec(input, &mut out, flate2::FlushCompress::Finish)?
            == flate2::Status::StreamEnd
        {
            return Ok(out);
        }
    }
}

/// Writes the tree and, when it differs from the parent's, the commit object (the branch is
/// not moved here).
fn write_and_commit(
    repo: &Repository,
    root: &Dir<'_>,
    parent: Option<&git2::Commit<'_>>,
    old_tree: Option<&Tree<'_>>,
    written: &mut Vec<Oid>,
    message: impl FnOnce(&[String]) -> String,
    started: std::time::Instant,
) -> Result<(CommitOutcome, Option<Oid>), git2::Error> {
    let mut changed = Vec::new();
    let tree_id = write_dir(repo, root, old_tree, "", written, &mut changed)?;
    changed.sort();
    changed.dedup();
    tracing::debug!(elapsed = ?started.elapsed(), "tree written");
    let tree = repo.find_tree(tree_id)?;
    if old_tree.is_some_and(|t| t.id() == tree_id) {
        let head = parent.map(|c| c.id().to_string()).unwrap_or_default();
        let outcome = CommitOutcome {
            commit: None,
            head,
            changed: vec![],
        };
        return Ok((outcome, None));
    }
    if cfg!(debug_assertions) {
        // Tests run with debug assertions: every render of every test holds the paths
        // collected while writing equal to Git's own diff of the two trees.
        let diff = repo.diff_tree_to_tree(old_tree, Some(&tree), None)?;
        let mut from_git: Vec<String> = diff
            .deltas()
            .filter_map(|d| {
                d.new_file()
                    .path()
                    .or_else(|| d.old_file().path())
                    .map(|p| p.to_string_lossy().into_owned())
            })
            .collect();
        from_git.sort();
        assert_eq!(changed, from_git, "changed paths differ from the tree diff");
    }
    let signature = Signature::now("Fleetscope renderer", "renderer@fleetscope.invalid")?;
    let parents: Vec<&git2::Commit<'_>> = parent.into_iter().collect();
    let commit = repo.commit(
        None,
        &signature,
        &signature,
        &message(&changed),
        &tree,
        &parents,
    )?;
    tracing::debug!(elapsed = ?started.elapsed(), "commit written");
    let outcome = CommitOutcome {
        commit: Some(commit.to_string()),
        head: commit.to_string(),
        changed,
    };
    Ok((outcome, Some(commit)))
}

/// The platform repo's commit a render read: the `HEAD` of the Git repository that holds the
/// platform directory. Files changed and not committed are rendered as they are; the commit
/// still names `HEAD`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformCommit {
    pub id: String,
    /// Its committer time, seconds since the epoch.
    pub committed_at: i64,
}

/// The commit at `HEAD` of the Git repository holding `platform_dir`, if it is in one and has
/// a commit.
pub fn platform_commit(platform_dir: &Path) -> Option<PlatformCommit> {
    let repo = Repository::discover(platform_dir).ok()?;
    let commit = repo.head().ok()?.peel_to_commit().ok()?;
    let committed_at = commit.committer().when().seconds();
    Some(PlatformCommit {
        id: commit.id().to_string(),
        committed_at,
    })
}

/// Commits everything in `platform_dir` as the platform team would (a Git repository is made
/// there when it has none), for simulations that change a platform repo: its renders then carry
/// the commit and its time. Returns the commit's id.
pub fn commit_platform(platform_dir: &Path, message: &str) -> Result<String, git2::Error> {
    let repo = match Repository::open(platform_dir) {
        Ok(repo) => repo,
        Err(_) => Repository::init(platform_dir)?,
    };
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let signature = Signature::now("Fleetscope simulation", "simulation@fleetscope.invalid")?;
    let parent = repo.head().ok().and_then(|h| h.peel_to_commit().ok());
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let id = repo.commit(
        Some("HEAD"),
        &signature,
        &signature,
        message,
        &tree,
        &parents,
    )?;
    Ok(id.to_string())
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

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    #[test]
    fn one_compressor_gives_whole_zlib_streams_one_after_another() {
        let mut compress = flate2::Compress::new(flate2::Compression::default(), true);
        let large: Vec<u8> = (0..200_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        for raw in [&b""[..], b"blob 5\0hello", &large, b"tree 0\0"] {
            let packed = zlib(&mut compress, raw).unwrap();
            let mut back = Vec::new();
            flate2::read::ZlibDecoder::new(&packed[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, raw);
            let mut encoder =
                flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            std::io::Write::write_all(&mut encoder, raw).unwrap();
            assert_eq!(
                packed,
                encoder.finish().unwrap(),
                "the bytes a new encoder writes"
            );
        }
    }

    #[test]
    fn a_platform_directory_committed_twice_has_the_second_commit_as_its_head() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(platform_commit(dir.path()).map(|c| c.id), None);
        std::fs::write(dir.path().join("apps.yaml"), "version: 1.0.0\n").unwrap();
        let first = commit_platform(dir.path(), "first").unwrap();
        std::fs::write(dir.path().join("apps.yaml"), "version: 1.1.0\n").unwrap();
        let second = commit_platform(dir.path(), "second").unwrap();
        assert_ne!(first, second);
        let head = platform_commit(dir.path()).unwrap();
        assert_eq!(head.id, second);
        let repo = Repository::open(dir.path()).unwrap();
        let commit = repo.find_commit(Oid::from_str(&second).unwrap()).unwrap();
        assert_eq!(commit.parent_id(0).unwrap().to_string(), first);
        assert_eq!(commit.message().ok(), Some("second"));
    }
}
