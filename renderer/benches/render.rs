//! Render benchmark: a generated platform repo (30,000 clusters × 100 apps by default) rendered
//! into a fresh Git repository, then rendered again unchanged (no-op), then after one app's
//! version changed. Prints times, render groups, files written and files in the output. Then
//! `fleetscope import` of that fleet as its agents would report it (every desired app running
//! without stamps, every tenth cluster at another version): planning, then writing and checking
//! the repo.
//!
//! `cargo bench -p fleetscope-renderer --bench render`; `FLEETSCOPE_BENCH_CLUSTERS` and
//! `FLEETSCOPE_BENCH_APPS` change the size.

use std::time::Instant;

use fleetscope_renderer::{generate, render};

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| v.replace('_', "").parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let test_mode = !std::env::args().any(|a| a == "--bench");
    let clusters = if test_mode {
        300
    } else {
        env_number("FLEETSCOPE_BENCH_CLUSTERS", 30_000)
    };
    let apps = if test_mode {
        20
    } else {
        env_number("FLEETSCOPE_BENCH_APPS", 100)
    };
    let platform = tempfile::tempdir().unwrap();
    let output = tempfile::tempdir().unwrap();
    generate::generate(platform.path(), clusters, apps).unwrap();

    let started = Instant::now();
    let full = render(platform.path(), output.path()).unwrap();
    let full_time = started.elapsed();
    let app_files = full.files.keys().filter(|p| p.contains("/apps/")).count();

    let started = Instant::now();
    let noop = render(platform.path(), output.path()).unwrap();
    let noop_time = started.elapsed();
    assert!(
        noop.commit.commit.is_none(),
        "a no-op render commits nothing"
    );

    let started = Instant::now();
    let unchanged = fleetscope_renderer::render_if_changed(platform.path(), output.path()).unwrap();
    let digest_time = started.elapsed();
    assert!(unchanged.is_none(), "identical inputs are recognised");

    let apps_file = platform.path().join("apps/apps.yaml");
    let text = std::fs::read_to_string(&apps_file).unwrap();
    std::fs::write(
        &apps_file,
        text.replacen(
            "name: app-004\nversion: 1.4.0",
            "name: app-004\nversion: 1.4.1",
            1,
        ),
    )
    .unwrap();
    let started = Instant::now();
    let one = render(platform.path(), output.path()).unwrap();
    let one_time = started.elapsed();
    assert!(
        one.commit
            .changed
            .iter()
            .all(|p| p.ends_with("/apps/app-004.yaml") || p.ends_with("/.fleetscope-render")),
        "{:?}",
        &one.commit.changed[..3.min(one.commit.changed.len())]
    );

    println!(
        "render: {clusters} clusters x {apps} apps -> {} render groups; full {:.2} s ({} files: {} app objects + {} cluster entries + group files), \
no-op {:.2} s (no commit; {:.2} s when the input digest matches), one-app change {:.2} s ({} files changed, {} of {} render groups kept without rendering)",
        full.assigned.groups.len(),
        full_time.as_secs_f64(),
        full.files.len(),
        app_files,
        full.assigned.members.len(),
        noop_time.as_secs_f64(),
        digest_time.as_secs_f64(),
        one_time.as_secs_f64(),
        one.commit.changed.len(),
        one.kept_groups,
        one.assigned.groups.len()
    );
    import(&one.assigned);
}

/// Times `fleetscope import` of a fleet running what `assigned` desires, objects without
/// stamps, every tenth cluster at another version of each app.
fn import(assigned: &fleetscope_renderer::assign::Assigned) {
    use fleetscope_renderer::import::{build, facts, files, write};
    let mut fleet = facts::FleetFacts::default();
    for (n, (cluster, group)) in assigned.members.iter().enumerate() {
        fleet.clusters.insert(cluster.to_string(), None);
        for a in &assigned.groups[group].assignments {
            let version = if n % 10 == 0 {
                format!("{}-other", a.version)
            } else {
                a.version.to_string()
            };
            fleet.objects.push(facts::RunningObject {
                cluster: cluster.to_string(),
                kind: fleetscope_model::ObjectKind::HelmRelease,
                namespace: "apps".into(),
                name: a.app.to_string(),
                app: None,
                version: Some(version),
                stamped: false,
            });
        }
    }
    let options = build::Options {
        owners: vec!["platform".into()],
        ..build::Options::default()
    };
    let started = Instant::now();
    let plan = build::Plan {
        clusters: build::plan_clusters(&fleet, &[], &options),
        apps: build::plan_apps(&fleet, &files::Manifests::default()),
    };
    let plan_time = started.elapsed();
    let dir = tempfile::tempdir().unwrap();
    let written = write::write(&dir.path().join("platform"), &plan, &options).unwrap();
    let total = started.elapsed();
    assert_eq!(
        written.desired_equal, written.running,
        "import desires what runs"
    );
    println!(
        "import: {} clusters, {} running pairs, {} apps -> {} render groups; plan {:.2} s, write and check {:.2} s, total {:.2} s",
        plan.clusters.len(),
        written.running,
        plan.apps.len(),
        written.render_groups,
        plan_time.as_secs_f64(),
        (total - plan_time).as_secs_f64(),
        total.as_secs_f64()
    );
}
