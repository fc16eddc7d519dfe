//! The renderer end to end on real Git: golden output of the example platform repo (Flux
//! Kustomization and HelmRelease, Argo CD Application, overlays, namespaces, precedence),
//! determinism, no-op renders, one-app changes, every validation error at once, and pushing to a
//! bare remote.

use std::path::Path;

use crate::example;
use expect_test::{expect, expect_file};
use fleetscope_renderer::{git, render, RenderError};

/// The tree id at the head of the repository at `p`.
fn tree(p: &Path) -> git2::Oid {
    git2::Repository::open(p)
        .unwrap()
        .head()
        .unwrap()
        .peel_to_tree()
        .unwrap()
        .id()
}

#[test]
fn example_platform_golden_output() {
    let out = tempfile::tempdir().unwrap();
    let outcome = render(&example(), out.path()).unwrap();
    let mut text = String::new();
    for (path, content) in &outcome.files {
        text.push_str(&format!("=== {path}\n{content}"));
    }
    expect_file!["expect/example-output.txt"].assert_eq(&text);
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(out.path())
        .args(["fsck", "--strict"])
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "git fsck: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    // Output grows with apps × render groups (+ one entry per cluster), not apps × clusters.
    let app_files = outcome
        .files
        .keys()
        .filter(|p| p.contains("/apps/"))
        .count();
    let pairs: usize = outcome
        .assigned
        .groups
        .values()
        .map(|g| g.assignments.len())
        .sum();
    assert_eq!(app_files, pairs);
    assert_eq!(
        outcome
            .files
            .keys()
            .filter(|p| p.starts_with("clusters/") && p.ends_with("/entry.yaml"))
            .count(),
        outcome.assigned.members.len()
    );
}

#[test]
fn deterministic_incremental_and_no_op() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = render(&example(), a.path()).unwrap();
    let second = render(&example(), b.path()).unwrap();
    assert_eq!(first.files, second.files, "byte-identical output");
    assert_eq!(tree(a.path()), tree(b.path()));

    assert!(
        fleetscope_renderer::render_if_changed(&example(), a.path())
            .unwrap()
            .is_none(),
        "same inputs: recognised by digest, nothing rendered"
    );
    let message = git2::Repository::open(a.path())
        .unwrap()
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .message()
        .unwrap()
        .to_owned();
    assert!(
        message.contains(&format!(
            "{}{}",
            fleetscope_renderer::DIGEST_TRAILER,
            fleetscope_renderer::platform_digest(&example()).unwrap()
        )),
        "{message}"
    );
    let again = render(&example(), a.path()).unwrap();
    assert_eq!(again.commit.commit, None, "a no-op render writes no commit");
    assert_eq!(again.summary, "render: nothing changed");

    let platform = crate::copy_of_example();
    let apps = platform.path().join("apps/platform.yaml");
    std::fs::write(
        &apps,
        std::fs::read_to_string(&apps)
            .unwrap()
            .replace("version: 0.9.3", "version: 0.9.4"),
    )
    .unwrap();
    let changed = render(platform.path(), a.path()).unwrap();
    assert!(changed.commit.commit.is_some());
    assert!(
        changed
            .commit
            .changed
            .iter()
            .all(|p| p.ends_with("/apps/metrics-agent.yaml") || p.ends_with("/.fleetscope-render")),
        "only the changed app's files (and each folder's record): {:?}",
        changed.commit.changed
    );
    assert_eq!(
        changed.commit.changed.len(),
        2 * first.assigned.groups.len(),
        "once per render group"
    );
    assert_eq!(
        changed.kept_groups, 0,
        "metrics-agent runs in every render group"
    );
    assert_eq!(
        changed.assigned.members, first.assigned.members,
        "no render group renamed, no cluster moved"
    );
    // The work tree follows: the changed file is checked out, nothing else differs.
    let group = &first.assigned.members[&fleetscope_model::ClusterId::parse("lab-01").unwrap()];
    let on_disk = std::fs::read_to_string(
        a.path()
            .join(format!("render-groups/{group}/apps/metrics-agent.yaml")),
    )
    .unwrap();
    assert!(
        on_disk.contains("fleetscope.io/version: 0.9.4"),
        "{on_disk}"
    );
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(a.path())
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        status.stdout.is_empty(),
        "work tree matches the commit: {}",
        String::from_utf8_lossy(&status.stdout)
    );
    let log = git2::Repository::open(a.path())
        .unwrap()
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .message()
        .unwrap()
        .to_owned();
    assert!(log.starts_with("render: 1 app(s) changed (metrics-agent) in 4 render group(s) reaching 7 cluster(s); 0 cluster entry file(s) changed"), "{log}");
}

#[test]
fn every_validation_error_at_once_and_nothing_written() {
    let platform = crate::copy_of_example();
    std::fs::write(
        platform.path().join("broken.yaml"),
        r#"kind: Cluster
id: Berlin_01
group: emea//de
environment: qa
reconciler: fleet
---
kind: Cluster
id: berlin-01
group: emea/de/berlin
environment: prod
reconciler: flux
labels: {"bad key!": x}
---
kind: Application
name: loop-a
version: "1.0"
namespace: shop
reconciler: flux-kustomization
source: {type: git, url: u, path: p, ref: main}
dependsOn: [loop-b, ghost]
---
kind: Application
name: loop-b
version: "1.0"
namespace: nowhere
reconciler: flux-helmrelease
source: {type: git, url: u, path: p, ref: main}
dependsOn: [loop-a]
---
kind: Policy
name: all-stores
apps: {names: [checkout]}
clusters: {matchExpressions: [{key: tier, operator: Exists, values: [x]}]}
version: "two point oh"
"#,
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = render(platform.path(), &out.path().join("repo")).unwrap_err();
    let RenderError::Invalid(errors) = err else {
        panic!("expected validation errors")
    };
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    expect![[r#"
        [
            "broken.yaml#1 environment: environment \"qa\" is not defined (add a `kind: Environment` document)",
            "broken.yaml#1 group: group path \"emea//de\" has an empty segment at position 1 (leading, trailing or doubled '/')",
            "broken.yaml#1 id: cluster id \"Berlin_01\" has 'B' at position 0; allowed are lowercase letters a-z, digits 0-9, '-' and '.'",
            "broken.yaml#1 reconciler: \"fleet\" is not a reconciler (flux or argocd)",
            "broken.yaml#2 labels: label key \"bad key!\" is invalid: only letters, digits, '-', '_' and '.' are allowed",
            "broken.yaml#3 dependsOn: dependency cycle: loop-a → loop-b → loop-a",
            "broken.yaml#3 dependsOn[1]: application \"ghost\" is not defined",
            "broken.yaml#4: app \"loop-b\": kind flux-helmrelease cannot use a git source",
            "broken.yaml#4 namespace: namespace \"nowhere\" is not defined (add a `kind: Namespace` document)",
            "broken.yaml#5 clusters: selector requirement on \"tier\": operator Exists takes no values",
            "broken.yaml#5 version: version \"two point oh\" has ' ' at position 3; allowed are printable ASCII characters without spaces",
            "clusters/emea.yaml#1 id: cluster \"berlin-01\" is already defined in broken.yaml#2",
            "policies/baseline.yaml#1 name: policy \"all-stores\" is already defined in broken.yaml#5",
        ]
    "#]]
    .assert_debug_eq(&text);
    assert!(
        !out.path().join("repo").exists(),
        "nothing written when validation fails"
    );
}

#[test]
fn equal_priority_pins_conflict() {
    let platform = crate::copy_of_example();
    std::fs::write(
        platform.path().join("policies/conflict.yaml"),
        "kind: Policy\nname: pin-a\napps: {names: [payments]}\nclusters: {groups: [emea/de]}\nversion: 2.1.0\n---\nkind: Policy\nname: pin-b\napps: {names: [payments]}\nclusters: {groups: [emea]}\nversion: 2.2.0\n",
    )
    .unwrap();
    let err = fleetscope_renderer::plan(platform.path())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("policies/conflict.yaml#2 version: conflicts with policy \"pin-a\" (same priority 0): payments pinned to 2.1.0 and 2.2.0 on cluster berlin-01; give one a higher priority (and 3 more clusters)"),
        "{err}"
    );
}

#[test]
fn pushes_to_a_bare_remote() {
    let remote = tempfile::tempdir().unwrap();
    git2::Repository::init_bare(remote.path()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let outcome = render(&example(), out.path()).unwrap();
    let repo = git::open_or_init(out.path()).unwrap();
    repo.remote("origin", remote.path().to_str().unwrap())
        .unwrap();
    git::push(&repo).unwrap();
    let pushed = git2::Repository::open_bare(remote.path())
        .unwrap()
        .find_reference(git::BRANCH)
        .unwrap()
        .target()
        .unwrap()
        .to_string();
    assert_eq!(Some(pushed), outcome.commit.commit);
}

#[test]
fn explain_says_why_and_why_not() {
    let platform = crate::copy_of_example();
    std::fs::write(
        platform.path().join("apps/kiosk.yaml"),
        "kind: Application\nname: kiosk\nversion: 0.1.0\nnamespace: shop\nreconciler: flux-kustomization\nsource: {type: git, url: \"https://git.example.com/kiosk.git\", path: ./deploy, ref: main}\n---\nkind: Policy\nname: kiosks-in-flagships\napps: {names: [kiosk]}\nclusters: {matchLabels: {tier: flagship}, groups: [amer]}\n",
    )
    .unwrap();
    let (platform_model, assigned) = fleetscope_renderer::plan(platform.path()).unwrap();
    let lab = fleetscope_model::ClusterId::parse("lab-01").unwrap();
    let text =
        fleetscope_renderer::explain::explain(&platform_model, &assigned, &lab, None).unwrap();
    let group = &assigned.members[&lab];
    expect![[r#"
        cluster lab-01 (group emea/de/lab, environment stage, flux) → render group RG
        labels: canary=true, country=de, fleetscope.io/cluster=lab-01, fleetscope.io/environment=stage, fleetscope.io/reconciler=flux, region=emea
          checkout: desired, version 1.5.0-rc.1 (pinned by policy/checkout-canary); because policy/all-stores, then policy/checkout-canary
          kiosk: not desired; policy/kiosks-in-flagships does not select this cluster: label tier is not set (wanted "flagship"); group emea/de/lab is not within amer
          metrics-agent: desired, version 0.9.3 (the app's default); because policy/all-stores
          payments: desired, version 2.0.1 (the app's default); because policy/all-stores
    "#]]
    .assert_eq(&text.replace(group.as_str(), "RG"));
    let err = fleetscope_renderer::explain::explain(
        &platform_model,
        &assigned,
        &fleetscope_model::ClusterId::parse("nowhere").unwrap(),
        None,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cluster \"nowhere\" is not in the platform repo"
    );
}

#[test]
fn argo_cd_clusters_need_the_gitops_repository_url() {
    let platform = crate::copy_of_example();
    std::fs::remove_file(platform.path().join("gitops.yaml")).unwrap();
    let missing = fleetscope_renderer::plan(platform.path())
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("clusters/emea.yaml#4 reconciler: 2 cluster(s) use Argo CD, which pulls its render group by URL: add a `kind: GitOpsRepository` document with the output repository's url"),
        "{missing}"
    );
    std::fs::write(
        platform.path().join("gitops.yaml"),
        "kind: GitOpsRepository\nurl: fleet gitops\n---\nkind: GitOpsRepository\nurl: git@git.example.com:platform/a.git\n---\nkind: GitOpsRepository\nurl: https://git.example.com/b.git\n",
    )
    .unwrap();
    let text = fleetscope_renderer::plan(platform.path())
        .unwrap_err()
        .to_string();
    expect![[r#"
        the platform repo has 2 problem(s):
          gitops.yaml#1 url: "fleet gitops" is not a Git URL (https://, http://, ssh:// or git@host:path, no spaces)
          gitops.yaml#3 kind: only one GitOpsRepository document is allowed; the first is gitops.yaml#2"#]]
    .assert_eq(&text);
}

#[test]
fn substitution_on_argo_cd_clusters_is_reported() {
    let platform = crate::copy_of_example();
    let (_, assigned) = fleetscope_renderer::plan(platform.path()).unwrap();
    expect![[r#"
        [
            "app checkout: its values use ${VAR} substitution, which Argo CD does not perform; 2 Argo CD cluster(s) in 1 render group(s) get the text unchanged",
        ]
    "#]].assert_debug_eq(&fleetscope_renderer::warnings(&assigned));
    // Without the variable, nothing to report.
    let apps = platform.path().join("apps/shop.yaml");
    let text = std::fs::read_to_string(&apps).unwrap();
    std::fs::write(
        &apps,
        text.replace("store: \"${storeNumber}\"", "store: \"fixed\""),
    )
    .unwrap();
    let (_, assigned) = fleetscope_renderer::plan(platform.path()).unwrap();
    assert_eq!(
        fleetscope_renderer::warnings(&assigned),
        Vec::<String>::new()
    );
}

#[test]
fn a_render_group_that_disappears_leaves_no_folder_behind() {
    let platform = crate::copy_of_example();
    let out = tempfile::tempdir().unwrap();
    let first = render(platform.path(), out.path()).unwrap();
    // Without the canary policy, stage clusters share the content of their prod peers: the
    // canary render group goes away.
    let policies = platform.path().join("policies/baseline.yaml");
    let text = std::fs::read_to_string(&policies).unwrap();
    let canary = text.find("# Stage and canaries").unwrap();
    let end = text[canary..]
        .find("\n---\n")
        .map_or(text.len(), |i| canary + i + 5);
    std::fs::write(&policies, format!("{}{}", &text[..canary], &text[end..])).unwrap();
    let second = render(platform.path(), out.path()).unwrap();
    let gone: Vec<&String> = first
        .assigned
        .groups
        .keys()
        .filter(|g| !second.assigned.groups.contains_key(*g))
        .collect();
    assert!(!gone.is_empty(), "the change removed a render group");
    for group in gone {
        assert!(
            !out.path().join("render-groups").join(group).exists(),
            "{group}'s folder is removed from the work tree"
        );
        let repo = git2::Repository::open(out.path()).unwrap();
        assert!(
            git::read_file(&repo, &format!("render-groups/{group}/kustomization.yaml")).is_none(),
            "{group} is gone from the commit"
        );
    }
    assert!(
        second.summary.contains("render group(s) removed"),
        "{}",
        second.summary
    );
    assert!(
        !second.summary.contains("; 0 render group(s) removed"),
        "{}",
        second.summary
    );
    let fsck = std::process::Command::new("git")
        .arg("-C")
        .arg(out.path())
        .args(["fsck", "--strict"])
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    let status = std::process::Command::new("git")
        .arg("-C")
        .arg(out.path())
        .args(["status", "--porcelain"])
        .output()
        .unwrap();
    assert!(
        status.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
}

/// A render group whose inputs did not change is kept from the last commit without being
/// rendered, unless its folder no longer holds exactly what its record lists.
#[test]
fn unaffected_render_groups_are_kept_and_hand_edits_are_undone() {
    let platform = crate::copy_of_example();
    let out = tempfile::tempdir().unwrap();
    let first = render(platform.path(), out.path()).unwrap();
    assert_eq!(first.kept_groups, 0);
    let policies = platform.path().join("policies/baseline.yaml");
    let text = std::fs::read_to_string(&policies).unwrap();
    std::fs::write(
        &policies,
        text.replace("version: 1.5.0-rc.1", "version: 1.5.0-rc.2"),
    )
    .unwrap();
    let second = render(platform.path(), out.path()).unwrap();
    let canary_groups: std::collections::BTreeSet<&String> = second
        .assigned
        .groups
        .iter()
        .filter(|(_, c)| {
            c.assignments
                .iter()
                .any(|a| a.version.as_str() == "1.5.0-rc.2")
        })
        .map(|(name, _)| name)
        .collect();
    assert!(!canary_groups.is_empty());
    assert_eq!(
        second.kept_groups,
        second.assigned.groups.len() - canary_groups.len()
    );
    for path in &second.commit.changed {
        let group = path.split('/').nth(1).unwrap();
        assert!(
            canary_groups.contains(&group.to_owned()),
            "{path} is outside the canary groups"
        );
    }
    // Desired-state hashes cover kept groups too.
    assert_eq!(second.hashes.len(), first.hashes.len());
    assert_eq!(
        second
            .hashes
            .iter()
            .filter(|(k, _)| !canary_groups.contains(&k.0))
            .collect::<Vec<_>>(),
        first
            .hashes
            .iter()
            .filter(|(k, _)| !canary_groups.contains(&k.0))
            .collect::<Vec<_>>(),
    );

    // Someone edits a kept folder by hand and commits: the next render puts it back.
    let kept = second
        .assigned
        .groups
        .keys()
        .find(|g| !canary_groups.contains(g))
        .unwrap();
    let file = out
        .path()
        .join(format!("render-groups/{kept}/kustomization.yaml"));
    let rendered = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, "# edited by hand\n").unwrap();
    let entry = out.path().join("clusters/lab-01/entry.yaml");
    let entry_rendered = std::fs::read_to_string(&entry).unwrap();
    std::fs::write(&entry, "# edited by hand\n").unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(out.path())
            .args([
                "-c",
                "user.name=someone",
                "-c",
                "user.email=someone@example.com",
            ])
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["commit", "-q", "-am", "hand edit"]);
    let third = render(platform.path(), out.path()).unwrap();
    assert!(
        third.commit.commit.is_some(),
        "the hand edit is undone by a commit"
    );
    assert_eq!(
        third.commit.changed,
        vec![
            "clusters/lab-01/entry.yaml".to_owned(),
            format!("render-groups/{kept}/kustomization.yaml")
        ]
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), rendered);
    assert_eq!(std::fs::read_to_string(&entry).unwrap(), entry_rendered);
    // And a tree rendered incrementally equals one rendered from scratch.
    let fresh = tempfile::tempdir().unwrap();
    render(platform.path(), fresh.path()).unwrap();
    assert_eq!(tree(out.path()), tree(fresh.path()));
}

/// A first render of many files stores its objects as one pack; a small change stores its few
/// new objects loose. Both must leave a repository Git itself finds sound and a clean checkout.
#[test]
fn large_renders_go_into_a_pack_and_small_changes_loose_and_git_agrees() {
    let platform = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // 2,500 clusters: one entry file each, more objects than are ever stored loose.
    fleetscope_renderer::generate::generate(platform.path(), 2_500, 3).unwrap();
    render(platform.path(), out.path()).unwrap();
    let objects = out.path().join(".git/objects");
    let packs = || {
        std::fs::read_dir(objects.join("pack"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "pack")
            })
            .count()
    };
    let loose = || {
        std::fs::read_dir(&objects)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().len() == 2)
            .map(|e| std::fs::read_dir(e.path()).unwrap().count())
            .sum::<usize>()
    };
    assert_eq!((packs(), loose()), (1, 0), "the first render is one pack");

    let apps = platform.path().join("apps/apps.yaml");
    let text = std::fs::read_to_string(&apps).unwrap();
    let at = text.find("name: app-000\nversion: ").unwrap() + "name: app-000\nversion: ".len();
    let end = at + text[at..].find('\n').unwrap();
    std::fs::write(&apps, format!("{}9.9.9{}", &text[..at], &text[end..])).unwrap();
    let second = render(platform.path(), out.path()).unwrap();
    assert!(second.commit.commit.is_some());
    assert_eq!(packs(), 1, "a small change adds no pack");
    assert!(loose() > 0, "its objects are loose");

    for args in [&["fsck", "--strict"][..], &["status", "--porcelain"][..]] {
        let run = std::process::Command::new("git")
            .arg("-C")
            .arg(out.path())
            .args(args)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&run.stdout), "", "git {args:?}");
    }
    // The checkout holds the new version.
    let log = std::process::Command::new("git")
        .arg("-C")
        .arg(out.path())
        .args(["grep", "-l", "9.9.9", "HEAD", "--", "render-groups"])
        .output()
        .unwrap();
    assert!(!log.stdout.is_empty(), "the new version is in the commit");
}

/// Reasons are kept per reason set, not per render group: every cluster's reason set says, app
/// for app, what assigning that cluster alone says (the reasons and the pin), also in render
/// groups whose clusters got the same content for different reasons; and there are no more
/// reason sets than distinct sets of matching policies.
#[test]
fn every_clusters_reason_set_is_its_own_explanation() {
    let platform = tempfile::tempdir().unwrap();
    fleetscope_renderer::generate::generate(platform.path(), 1_500, 40).unwrap();
    // Two policies that change no content: one more reason for an app the clusters of one
    // site run anyway, and a pin to an app's own default version on another site's.
    std::fs::write(
        platform.path().join("policies/same-content.yaml"),
        "kind: Policy\nname: site-extra\napps: {names: [app-000]}\nclusters: {groups: [emea/de/site-001]}\n---\n\
kind: Policy\nname: hold-app-004\npriority: 2\napps: {names: [app-004]}\nclusters: {groups: [emea/fr/site-003]}\nversion: 1.4.0\n",
    )
    .unwrap();
    let (platform, assigned) = fleetscope_renderer::plan(platform.path()).unwrap();
    let mut signatures = std::collections::BTreeSet::new();
    let mut per_group: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
        Default::default();
    for (cluster, group) in &assigned.members {
        let set = &assigned.reason_set_of[cluster];
        per_group.entry(group).or_default().insert(set);
        let own: Vec<_> = fleetscope_renderer::assign::assign_cluster(&platform, cluster)
            .unwrap()
            .into_iter()
            .map(|a| (a.app, a.reasons, a.pinned_by))
            .collect();
        let published: Vec<_> = assigned.reason_sets[set]
            .iter()
            .map(|a| (a.app.clone(), a.reasons.clone(), a.pinned_by.clone()))
            .collect();
        assert_eq!(published, own, "{cluster} in {group} with {set}");
        signatures.insert((
            platform.clusters[cluster].reconciler,
            fleetscope_renderer::assign::matching_policies(&platform, cluster),
        ));
    }
    assert!(assigned.reason_sets.len() <= signatures.len());
    let mixed = per_group.values().filter(|sets| sets.len() > 1).count();
    assert!(mixed >= 2, "mixed render groups: {mixed}");
    assert_eq!(
        assigned
            .reason_set_of
            .values()
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        assigned.reason_sets.len(),
        "every reason set belongs to a cluster"
    );
}
