//! The render cache never changes a render's result. A generated platform repo goes through a
//! sequence of changes to every kind of file it holds (edited, added, renamed, deleted, made
//! invalid) and to the cache itself (corrupted, truncated, of another format, removed); after
//! each change it is rendered three ways, and the three must agree byte for byte:
//!
//! - `warm`: into the output repository that rendered every earlier step, with its cache;
//! - `twin`: into a copy of that repository taken just before, with the cache deleted, so
//!   the commit (message, changed paths, summary) can be compared too;
//! - `cold`: into a fresh directory, and with [`fleetscope_renderer::plan`], the renderer's
//!   path that never reads a cache.
//!
//! A property test applies random sequences of such changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fleetscope_model::Timestamp;
use fleetscope_renderer::cache::CACHE_DIR;
use fleetscope_renderer::{desired, generate, render, RenderError, RenderOutcome};
use proptest::prelude::*;

/// Every path and blob of the output's branch `main`.
fn committed_tree(output: &Path) -> BTreeMap<String, Vec<u8>> {
    let repo = git2::Repository::open(output).unwrap();
    let tree = repo
        .find_reference(fleetscope_renderer::git::BRANCH)
        .unwrap()
        .peel_to_tree()
        .unwrap();
    let mut files = BTreeMap::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |folder, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            let blob = repo.find_blob(entry.id()).unwrap();
            files.insert(
                format!("{folder}{}", entry.name().unwrap()),
                blob.content().to_vec(),
            );
        }
        git2::TreeWalkResult::Ok
    })
    .unwrap();
    files
}

/// A repository whose branch `main` is the head of the one at `output`, without its cache or
/// its work tree: it reads the objects of `output` (Git's alternates) rather than a copy of
/// them, so taking one costs a few files.
fn twin_of(output: &Path) -> tempfile::TempDir {
    let twin = tempfile::tempdir().unwrap();
    let mut options = git2::RepositoryInitOptions::new();
    options.initial_head("main");
    let repo = git2::Repository::init_opts(twin.path(), &options).unwrap();
    let objects = output.join(".git/objects").canonicalize().unwrap();
    std::fs::write(
        repo.path().join("objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .unwrap();
    let head = git2::Repository::open(output)
        .unwrap()
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id();
    repo.reference("refs/heads/main", head, true, "twin")
        .unwrap();
    twin
}

/// The message of the commit at the output's branch `main`.
fn head_message(output: &Path) -> String {
    let repo = git2::Repository::open(output).unwrap();
    let commit = repo
        .find_reference(fleetscope_renderer::git::BRANCH)
        .unwrap()
        .peel_to_commit()
        .unwrap();
    commit.message().unwrap().to_owned()
}

/// What a render gave, in a form two renders can be compared by: everything but what depends
/// on the output's history (the commit id, and which files were written rather than kept).
#[derive(Debug, PartialEq)]
enum Seen {
    Rendered {
        tree: BTreeMap<String, Vec<u8>>,
        platform: Box<fleetscope_renderer::validate::Platform>,
        assigned: Box<fleetscope_renderer::assign::Assigned>,
        hashes: BTreeMap<(String, String), String>,
        warnings: Vec<String>,
        /// The desired-state rows the render publishes into an empty store, each row's commit
        /// left out.
        rows: String,
    },
    Invalid(Vec<String>),
}

/// Panics unless `a` and `b` are equal, naming first what differs (the paths of the tree, the
/// parts of the outcome) rather than printing both whole.
fn assert_same(a: &Seen, b: &Seen, context: &str) {
    if a == b {
        return;
    }
    if let (
        Seen::Rendered {
            tree: tree_a,
            platform: platform_a,
            assigned: assigned_a,
            hashes: hashes_a,
            warnings: warnings_a,
            rows: rows_a,
        },
        Seen::Rendered {
            tree: tree_b,
            platform: platform_b,
            assigned: assigned_b,
            hashes: hashes_b,
            warnings: warnings_b,
            rows: rows_b,
        },
    ) = (a, b)
    {
        let paths: Vec<&String> = tree_a
            .keys()
            .chain(tree_b.keys())
            .filter(|path| tree_a.get(*path) != tree_b.get(*path))
            .take(10)
            .collect();
        let parts = [
            ("platform", platform_a != platform_b),
            ("assigned", assigned_a != assigned_b),
            ("hashes", hashes_a != hashes_b),
            ("warnings", warnings_a != warnings_b),
            ("desired rows", rows_a != rows_b),
        ];
        let parts: Vec<&str> = parts.iter().filter(|(_, d)| *d).map(|(n, _)| *n).collect();
        panic!("{context}: the renders differ in {parts:?} and in the files {paths:?}");
    }
    assert_eq!(a, b, "{context}");
}

fn rows_without_commit(outcome: &RenderOutcome) -> String {
    let mut rows = desired::rows(
        outcome,
        &desired::Current::default(),
        7,
        Timestamp(1_800_000_000),
    );
    for row in &mut rows.desired {
        row.commit.clear();
    }
    rows.render.commit.clear();
    rows.render.summary.clear();
    format!("{rows:#?}")
}

fn seen(result: Result<RenderOutcome, RenderError>, output: &Path) -> Seen {
    match result {
        Ok(outcome) => Seen::Rendered {
            tree: committed_tree(output),
            rows: rows_without_commit(&outcome),
            platform: Box::new(outcome.platform),
            assigned: Box::new(outcome.assigned),
            hashes: outcome.hashes,
            warnings: outcome.warnings,
        },
        Err(RenderError::Invalid(errors)) => {
            Seen::Invalid(errors.iter().map(ToString::to_string).collect())
        }
        Err(err) => panic!("not a platform problem: {err}"),
    }
}

/// A platform repo and the output repository rendered from it at every step.
struct Fleet {
    platform: tempfile::TempDir,
    warm: tempfile::TempDir,
    /// The step's number, for messages.
    step: usize,
}

impl Fleet {
    fn new(clusters: usize, apps: usize) -> Fleet {
        let platform = tempfile::tempdir().unwrap();
        generate::generate(platform.path(), clusters, apps).unwrap();
        let fleet = Fleet {
            platform,
            warm: tempfile::tempdir().unwrap(),
            step: 0,
        };
        render(fleet.platform.path(), fleet.warm.path()).unwrap();
        fleet
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.platform.path().join(relative)
    }

    fn cache(&self) -> PathBuf {
        self.warm.path().join(".git").join(CACHE_DIR)
    }

    /// Renders the platform as it now is the three ways, and checks that they agree.
    fn check(&mut self, what: &str) -> bool {
        self.step += 1;
        let context = format!("step {} ({what})", self.step);
        let twin = twin_of(self.warm.path());
        let twin_cache = twin.path().join(".git").join(CACHE_DIR);
        let warm_result = render(self.platform.path(), self.warm.path());
        let twin_result = render(self.platform.path(), twin.path());
        assert!(
            twin_cache.exists() == warm_result.is_ok(),
            "{context}: a valid render writes the cache"
        );
        match (&warm_result, &twin_result) {
            (Ok(warm), Ok(twin_outcome)) => {
                assert_eq!(warm.summary, twin_outcome.summary, "{context}: summary");
                assert_eq!(warm.files, twin_outcome.files, "{context}: files written");
                assert_eq!(
                    warm.kept_groups, twin_outcome.kept_groups,
                    "{context}: kept"
                );
                assert_eq!(
                    warm.commit.changed, twin_outcome.commit.changed,
                    "{context}"
                );
                assert_eq!(
                    head_message(self.warm.path()),
                    head_message(twin.path()),
                    "{context}: commit message"
                );
            }
            (Err(_), Err(_)) => {}
            _ => panic!("{context}: one of warm and twin failed"),
        }
        let valid = warm_result.is_ok();
        let warm_seen = seen(warm_result, self.warm.path());
        let twin_seen = seen(twin_result, twin.path());
        assert_same(&warm_seen, &twin_seen, &format!("{context}: warm and twin"));
        // A bare repository: the same render and commit, without writing a work tree.
        let fresh = tempfile::tempdir().unwrap();
        git2::Repository::init_bare(fresh.path()).unwrap();
        let cold_seen = seen(render(self.platform.path(), fresh.path()), fresh.path());
        assert_same(
            &warm_seen,
            &cold_seen,
            &format!("{context}: warm and a fresh output"),
        );
        match (fleetscope_renderer::plan(self.platform.path()), &warm_seen) {
            (
                Ok((platform, assigned)),
                Seen::Rendered {
                    platform: p,
                    assigned: a,
                    ..
                },
            ) => {
                assert_eq!((&platform, &assigned), (&**p, &**a), "{context}: plan");
            }
            (Err(RenderError::Invalid(errors)), Seen::Invalid(seen)) => {
                let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
                assert_eq!(&errors, seen, "{context}: plan's errors");
            }
            (planned, _) => panic!("{context}: plan and render disagree: {planned:?}"),
        }
        valid
    }

    fn edit(&self, relative: &str, from: &str, to: &str) {
        let path = self.path(relative);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{relative} holds {from:?}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn rename(&self, from: &str, to: &str) {
        let target = self.path(to);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::rename(self.path(from), target).unwrap();
    }

    fn remove(&self, relative: &str) {
        std::fs::remove_file(self.path(relative)).unwrap();
    }

    fn read(&self, relative: &str) -> Vec<u8> {
        std::fs::read(self.path(relative)).unwrap()
    }

    /// The cache's entry files, sorted.
    fn cache_entries(&self) -> Vec<PathBuf> {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(self.cache().join("files"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        entries
    }
}

/// A cluster document the generator does not write.
fn extra_cluster(id: &str, group: &str, environment: &str, reconciler: &str) -> String {
    format!("kind: Cluster\nid: {id}\ngroup: {group}\nenvironment: {environment}\nreconciler: {reconciler}\nlabels: {{tier: standard}}\nvalues: {{storeNumber: \"9{id}\"}}\n")
}

#[test]
fn every_change_renders_as_without_the_cache() {
    let mut fleet = Fleet::new(30, 10);
    assert!(fleet.check("nothing changed"));

    // Clusters: edit, add, rename, move a document, delete.
    fleet.edit("clusters/emea/de.yaml", "tier: standard", "tier: flagship");
    assert!(fleet.check("a cluster's label, which policies select on"));
    fleet.edit(
        "clusters/emea/de.yaml",
        "storeNumber: \"000",
        "storeNumber: \"100",
    );
    assert!(fleet.check("a cluster's value, which only its entry carries"));
    fleet.edit(
        "clusters/amer/us.yaml",
        "environment: prod",
        "environment: stage",
    );
    assert!(fleet.check("a cluster's environment"));
    fleet.edit(
        "clusters/apac/jp.yaml",
        "reconciler: flux",
        "reconciler: argocd",
    );
    assert!(fleet.check("a cluster's reconciler"));
    fleet.write(
        "clusters/emea/xx.yaml",
        &extra_cluster("xx-site-000-900001", "emea/xx/site-000", "prod", "flux"),
    );
    assert!(fleet.check("a new cluster file, in a new group"));
    fleet.rename("clusters/emea/xx.yaml", "clusters/amer/xx.yml");
    assert!(fleet.check("a cluster file renamed (and .yml)"));
    fleet.rename("clusters/amer/xx.yml", "zz-last.yaml");
    assert!(fleet.check("a cluster file moved to the end of the load order"));
    fleet.rename("zz-last.yaml", "clusters/amer/.hidden.yaml");
    assert!(fleet.check("a cluster file hidden (no longer read)"));
    fleet.remove("clusters/amer/.hidden.yaml");
    let fr = fleet.read("clusters/emea/fr.yaml");
    fleet.remove("clusters/emea/fr.yaml");
    assert!(fleet.check("a cluster file deleted"));
    fleet.write("clusters/emea/fr.yaml", std::str::from_utf8(&fr).unwrap());
    assert!(fleet.check("the deleted file back"));
    fleet.rename("clusters/emea/fr.yaml", "clusters/emea/france.yaml");
    assert!(fleet.check("the same file under another name (origins change)"));
    let text = String::from_utf8(fleet.read("clusters/emea/de.yaml")).unwrap();
    let (first, rest) = text.split_once("---\n").unwrap();
    fleet.write("clusters/emea/de.yaml", rest);
    fleet.write(
        "clusters/emea/france.yaml",
        &format!(
            "{}{first}---\n",
            String::from_utf8(fleet.read("clusters/emea/france.yaml")).unwrap()
        ),
    );
    assert!(fleet.check("a cluster document moved to another file"));

    // Invalid clusters: the errors must be the same too, and a later valid render right.
    fleet.write(
        "clusters/emea/dup.yaml",
        &first.replace("storeNumber", "other"),
    );
    assert!(!fleet.check("a duplicate cluster id in another file"));
    fleet.remove("clusters/emea/dup.yaml");
    fleet.edit(
        "clusters/emea/france.yaml",
        "environment: prod",
        "environment: qa",
    );
    assert!(!fleet.check("an undefined environment"));
    fleet.edit(
        "clusters/emea/france.yaml",
        "environment: qa",
        "environment: prod",
    );
    assert!(fleet.check("the environment back"));
    fleet.edit("clusters/emea/it.yaml", "labels: {", "labels: [");
    assert!(!fleet.check("YAML that does not parse"));
    fleet.edit("clusters/emea/it.yaml", "labels: [", "labels: {");
    fleet.write("clusters/emea/bin.yaml", "kind: Cluster\nid: \u{0}\n");
    let mut bytes = fleet.read("clusters/emea/bin.yaml");
    bytes.extend_from_slice(&[0xff, 0xfe]);
    std::fs::write(fleet.path("clusters/emea/bin.yaml"), bytes).unwrap();
    assert!(!fleet.check("a file that is not UTF-8"));
    fleet.remove("clusters/emea/bin.yaml");
    assert!(fleet.check("valid again"));

    // Environments, groups, the GitOps repository.
    fleet.edit(
        "environments.yaml",
        "name: dev\n",
        "name: dev\ndescription: developers\n",
    );
    assert!(fleet.check("an environment's description"));
    fleet.edit("environments.yaml", "name: stage\n", "name: staging\n");
    assert!(!fleet.check("an environment renamed away from its clusters"));
    fleet.edit("environments.yaml", "name: staging\n", "name: stage\n");
    fleet.edit(
        "groups.yaml",
        "labels: {country: de}",
        "labels: {country: de, tier: flagship}",
    );
    assert!(fleet.check("a group's labels, which every cluster below inherits"));
    fleet.write(
        "more-groups.yaml",
        "kind: Group\npath: emea/de/site-001\nlabels: {canary: \"true\"}\n",
    );
    assert!(fleet.check("a new group file"));
    fleet.rename("more-groups.yaml", "policies/groups-too.yaml");
    assert!(fleet.check("the group file renamed"));
    fleet.remove("policies/groups-too.yaml");
    assert!(fleet.check("the group file deleted"));
    fleet.edit("gitops.yaml", "fleet-gitops.git", "fleet-gitops-2.git");
    assert!(fleet.check("the GitOps repository's URL, in every Argo CD entry"));
    let gitops = fleet.read("gitops.yaml");
    fleet.remove("gitops.yaml");
    assert!(!fleet.check("no GitOps repository for the Argo CD clusters"));
    fleet.write("apps/gitops.yaml", std::str::from_utf8(&gitops).unwrap());
    assert!(fleet.check("the GitOps repository in another file"));

    // Apps and namespaces.
    fleet.edit(
        "apps/apps.yaml",
        "name: app-004\nversion: 1.4.0",
        "name: app-004\nversion: 1.4.1",
    );
    assert!(fleet.check("one app's version"));
    fleet.edit(
        "apps/apps.yaml",
        "values: {replicas: 2}",
        "values: {replicas: 3, extra: {a: [1, 2.5]}}",
    );
    assert!(fleet.check("one app's values"));
    fleet.edit(
        "apps/apps.yaml",
        "quota: {requests.cpu: \"8\"}",
        "quota: {requests.cpu: \"16\"}",
    );
    assert!(fleet.check("a namespace's quota"));
    fleet.write("apps/extra.yaml", "kind: Application\nname: app-900\nversion: 0.1.0\nnamespace: shop\nreconciler: flux-kustomization\nsource: {type: git, url: \"https://git.example.com/x.git\", path: ./, ref: main}\nlabels: {team: shop, scope: base}\n");
    assert!(fleet.check("a new app file"));
    fleet.rename("apps/extra.yaml", "clusters/extra-app.yaml");
    assert!(fleet.check("the app file renamed into the clusters folder"));
    fleet.remove("clusters/extra-app.yaml");
    assert!(fleet.check("the app file deleted"));
    fleet.edit(
        "apps/apps.yaml",
        "name: app-001\n",
        "name: app-001-renamed\n",
    );
    assert!(!fleet.check("an app renamed away from its namespace and the canary policy"));
    fleet.edit(
        "apps/apps.yaml",
        "name: app-001-renamed\n",
        "name: app-001\n",
    );
    assert!(fleet.check("the app back"));

    // Policies.
    fleet.edit(
        "policies/policies.yaml",
        "name: flagship-capacity\npriority: 10",
        "name: flagship-capacity\npriority: 2",
    );
    assert!(fleet.check("a policy's priority (precedence order)"));
    fleet.edit(
        "policies/policies.yaml",
        "clusters: {matchLabels: {tier: flagship}}",
        "clusters: {matchLabels: {tier: standard}}",
    );
    assert!(fleet.check("a policy's cluster selector"));
    fleet.edit(
        "policies/policies.yaml",
        "values: {replicas: 6}",
        "values: {replicas: 7}",
    );
    assert!(fleet.check("a policy's values"));
    fleet.write("policies/late.yaml", "kind: Policy\nname: aaa-first\npriority: -1\napps: {names: [app-003]}\nclusters: {groups: [amer]}\nversion: 9.9.9\n");
    assert!(fleet.check("a new policy file, first in precedence"));
    fleet.rename("policies/late.yaml", "a-policy.yaml");
    assert!(fleet.check("the policy file renamed"));
    fleet.edit("a-policy.yaml", "version: 9.9.9", "version: not a version");
    assert!(!fleet.check("an invalid pin"));
    fleet.remove("a-policy.yaml");
    assert!(fleet.check("the policy file deleted"));

    // The cache itself: corrupt, truncated, foreign, of another file, missing.
    let entries = fleet.cache_entries();
    assert!(!entries.is_empty());
    fleet.edit("apps/apps.yaml", "version: 1.4.1", "version: 1.4.2");
    for entry in &entries {
        let mut bytes = std::fs::read(entry).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 0x20;
        std::fs::write(entry, bytes).unwrap();
    }
    assert!(fleet.check("every cache entry corrupted"));
    let entries = fleet.cache_entries();
    for entry in &entries {
        let bytes = std::fs::read(entry).unwrap();
        std::fs::write(entry, &bytes[..bytes.len() / 2]).unwrap();
    }
    let folders = fleet.cache().join("folders");
    let bytes = std::fs::read(&folders).unwrap();
    std::fs::write(&folders, &bytes[..bytes.len() / 3]).unwrap();
    fleet.edit("apps/apps.yaml", "version: 1.4.2", "version: 1.4.3");
    assert!(fleet.check("every cache file truncated"));
    for entry in fleet.cache_entries().iter().chain([&folders]) {
        let text = std::fs::read_to_string(entry).unwrap();
        let foreign = text.replacen("fleetscope-render-cache/", "fleetscope-render-cache/0", 1);
        std::fs::write(entry, foreign).unwrap();
    }
    fleet.edit("apps/apps.yaml", "version: 1.4.3", "version: 1.4.4");
    assert!(fleet.check("every cache file of another format"));
    let entries = fleet.cache_entries();
    for (entry, other) in entries.iter().zip(entries.iter().rev()) {
        std::fs::copy(other, entry).unwrap();
    }
    fleet.edit("apps/apps.yaml", "version: 1.4.4", "version: 1.4.5");
    assert!(fleet.check("cache entries swapped between files"));
    std::fs::write(fleet.cache_entries()[0].clone(), b"").unwrap();
    std::fs::write(&folders, b"fleetscope").unwrap();
    assert!(fleet.check("an empty entry"));
    std::fs::remove_dir_all(fleet.cache()).unwrap();
    fleet.edit("clusters/emea/de.yaml", "tier: flagship", "tier: standard");
    assert!(fleet.check("no cache at all"));
    assert!(fleet.check("nothing changed at the end"));
}

#[test]
fn an_unchanged_file_is_not_parsed_again() {
    let fleet = Fleet::new(30, 10);
    let files = fleetscope_renderer::platform::read_files(fleet.platform.path()).unwrap();
    let cache = fleetscope_renderer::cache::RenderCache::of_output(fleet.warm.path()).unwrap();
    let planned = fleetscope_renderer::cache::plan(&files, Some(&cache)).unwrap();
    assert_eq!(
        (planned.cached_files, planned.parsed_files),
        (files.len(), 0)
    );
    fleet.edit(
        "apps/apps.yaml",
        "name: app-004\nversion: 1.4.0",
        "name: app-004\nversion: 1.4.1",
    );
    let files = fleetscope_renderer::platform::read_files(fleet.platform.path()).unwrap();
    let planned = fleetscope_renderer::cache::plan(&files, Some(&cache)).unwrap();
    assert_eq!(
        (planned.cached_files, planned.parsed_files),
        (files.len() - 1, 1)
    );
}

/// One change a property-test case makes.
#[derive(Debug, Clone)]
enum Change {
    /// Toggles a label of the `n`-th cluster document (of all, in load order).
    ClusterLabel(usize),
    ClusterValue(usize),
    ClusterEnvironment(usize),
    /// A new file with one new cluster.
    AddCluster(usize),
    /// Renames the `n`-th platform file (to a name that sorts elsewhere).
    Rename(usize),
    Delete(usize),
    /// Moves the `n`-th file's first document to the end of the next file.
    MoveDocument(usize),
    AppVersion(usize),
    GroupLabel(usize),
    PolicyPriority(usize),
    /// Renames environment `stage` (away from its clusters) or back.
    Environment,
    /// Removes the GitOps repository document, or puts it back.
    GitOpsRepository,
    NamespaceQuota,
    /// Writes bytes that do not parse into the `n`-th file.
    Break(usize),
    /// Corrupts, truncates or removes cache files.
    Cache(usize),
    /// Back to the generated platform repo.
    Regenerate,
}

fn change() -> impl Strategy<Value = Change> {
    let n = 0usize..1000;
    prop_oneof![
        3 => n.clone().prop_map(Change::ClusterLabel),
        2 => n.clone().prop_map(Change::ClusterValue),
        1 => n.clone().prop_map(Change::ClusterEnvironment),
        1 => n.clone().prop_map(Change::AddCluster),
        2 => n.clone().prop_map(Change::Rename),
        1 => n.clone().prop_map(Change::Delete),
        1 => n.clone().prop_map(Change::MoveDocument),
        3 => n.clone().prop_map(Change::AppVersion),
        1 => n.clone().prop_map(Change::GroupLabel),
        1 => n.clone().prop_map(Change::PolicyPriority),
        1 => Just(Change::Environment),
        1 => Just(Change::GitOpsRepository),
        1 => Just(Change::NamespaceQuota),
        1 => n.clone().prop_map(Change::Break),
        2 => n.prop_map(Change::Cache),
        1 => Just(Change::Regenerate),
    ]
}

impl Fleet {
    /// The platform files, relative, in load order.
    fn files(&self) -> Vec<String> {
        fleetscope_renderer::platform::read_files(self.platform.path())
            .unwrap()
            .into_iter()
            .map(|f| f.relative)
            .collect()
    }

    /// Replaces the `n`-th match of `pattern` (over all files) with what `with` makes of it.
    fn edit_nth(&self, n: usize, pattern: &str, with: impl Fn(&str) -> String) {
        let mut hits = Vec::new();
        for file in self.files() {
            let text = String::from_utf8_lossy(&self.read(&file)).into_owned();
            for (at, _) in text.match_indices(pattern) {
                hits.push((file.clone(), at));
            }
        }
        if hits.is_empty() {
            return;
        }
        let (file, at) = &hits[n % hits.len()];
        let text = String::from_utf8_lossy(&self.read(file)).into_owned();
        let line_end = text[*at..].find('\n').map_or(text.len(), |e| at + e);
        let line = &text[*at..line_end];
        self.write(
            file,
            &format!("{}{}{}", &text[..*at], with(line), &text[line_end..]),
        );
    }

    fn apply(&mut self, change: &Change) {
        let files = self.files();
        let nth = |n: usize| files.get(n % files.len().max(1)).cloned();
        match change {
            Change::ClusterLabel(n) => self.edit_nth(*n, "labels: {tier: ", |line| {
                if line.contains("flagship") {
                    line.replace("flagship", "standard")
                } else {
                    line.replace("standard", "flagship")
                }
            }),
            Change::ClusterValue(n) => {
                self.edit_nth(*n, "values: {storeNumber: ", |line| line.replace('0', "7"))
            }
            Change::ClusterEnvironment(n) => {
                self.edit_nth(*n, "environment: ", |line| match line {
                    "environment: prod" => "environment: stage".to_owned(),
                    "environment: stage" => "environment: dev".to_owned(),
                    _ => "environment: prod".to_owned(),
                })
            }
            Change::AddCluster(n) => self.write(
                &format!("clusters/new-{n}.yaml"),
                &extra_cluster(&format!("new-{n}"), "emea/de/site-900", "prod", "flux"),
            ),
            Change::Rename(n) => {
                if let Some(file) = nth(*n) {
                    let name = file.replace('/', "-");
                    let target = if n % 2 == 0 {
                        format!("0-{name}")
                    } else {
                        format!("zz/{name}")
                    };
                    self.rename(&file, &target);
                }
            }
            Change::Delete(n) => {
                if let Some(file) = nth(*n) {
                    self.remove(&file);
                }
            }
            Change::MoveDocument(n) => {
                if let (Some(from), Some(to)) = (nth(*n), nth(n + 1)) {
                    let text = String::from_utf8_lossy(&self.read(&from)).into_owned();
                    if let Some((first, rest)) = text.split_once("---\n") {
                        if from != to {
                            let target = String::from_utf8_lossy(&self.read(&to)).into_owned();
                            self.write(&from, rest);
                            let joined = if target.is_empty() || target.ends_with("---\n") {
                                format!("{target}{first}\n")
                            } else {
                                format!("{target}\n---\n{first}\n")
                            };
                            self.write(&to, &joined);
                        }
                    }
                }
            }
            Change::AppVersion(n) => self.edit_nth(*n, "version: 1.", |line| format!("{line}1")),
            Change::GroupLabel(n) => self.edit_nth(*n, "labels: {country: ", |line| {
                line.replace("{country: ", "{canary: \"true\", country: ")
            }),
            Change::PolicyPriority(n) => {
                self.edit_nth(*n, "priority: ", |line| format!("{line}{}", n % 3))
            }
            Change::Environment => {
                if let Ok(text) = std::fs::read_to_string(self.path("environments.yaml")) {
                    let text = if text.contains("name: stage\n") {
                        text.replace("name: stage\n", "name: staging\n")
                    } else {
                        text.replace("name: staging\n", "name: stage\n")
                    };
                    self.write("environments.yaml", &text);
                }
            }
            Change::GitOpsRepository => {
                if self.path("gitops.yaml").exists() {
                    self.remove("gitops.yaml");
                } else {
                    self.write(
                        "gitops.yaml",
                        "kind: GitOpsRepository\nurl: https://git.example.com/again.git\n",
                    );
                }
            }
            Change::NamespaceQuota => {
                self.edit_nth(0, "quota: {requests.cpu: ", |line| line.replace('8', "12"))
            }
            Change::Break(n) => {
                if let Some(file) = nth(*n) {
                    self.write(&file, "kind: Cluster\nid: [unclosed\n");
                }
            }
            Change::Cache(n) => {
                let cache = self.cache();
                let mut targets: Vec<PathBuf> = std::fs::read_dir(cache.join("files"))
                    .map(|dir| dir.map(|e| e.unwrap().path()).collect())
                    .unwrap_or_default();
                targets.push(cache.join("folders"));
                targets.sort();
                let target = &targets[n % targets.len()];
                if let Ok(bytes) = std::fs::read(target) {
                    match n % 4 {
                        0 => std::fs::write(target, &bytes[..bytes.len() / 2]).unwrap(),
                        1 if !bytes.is_empty() => {
                            let mut bytes = bytes;
                            let at = n % bytes.len();
                            bytes[at] = bytes[at].wrapping_add(1);
                            std::fs::write(target, bytes).unwrap();
                        }
                        2 => std::fs::remove_file(target).unwrap(),
                        _ => {
                            let _ = std::fs::remove_dir_all(&cache);
                        }
                    }
                }
            }
            Change::Regenerate => {
                std::fs::remove_dir_all(self.platform.path()).unwrap();
                generate::generate(self.platform.path(), PROPERTY_CLUSTERS, PROPERTY_APPS).unwrap();
            }
        }
    }
}

/// The size of the platform repos the property test starts from.
const PROPERTY_CLUSTERS: usize = 24;
const PROPERTY_APPS: usize = 8;

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn random_changes_render_as_without_the_cache(changes in prop::collection::vec(change(), 1..5)) {
        let mut fleet = Fleet::new(PROPERTY_CLUSTERS, PROPERTY_APPS);
        for change in &changes {
            fleet.apply(change);
            fleet.check(&format!("{change:?}"));
        }
    }
}
