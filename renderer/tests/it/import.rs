//! `fleetscope import`: from what runs (the store's facts), manifests and an inventory CSV to
//! a platform repo that `render` accepts and whose desired state is what runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use fleetscope_model::matching::MatchRule;
use fleetscope_model::{AppSource, ObjectKind};
use fleetscope_renderer::import::build::{self, Options, Plan};
use fleetscope_renderer::import::facts::{FleetFacts, KnownCluster, RunningObject};
use fleetscope_renderer::import::files::{self, Manifests};
use fleetscope_renderer::import::write;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn options() -> Options {
    Options {
        owners: vec!["platform".into()],
        ..Options::default()
    }
}

fn plan(
    facts: &FleetFacts,
    manifests: &Manifests,
    inventory: &[files::InventoryRow],
    options: &Options,
) -> Plan {
    Plan {
        clusters: build::plan_clusters(facts, inventory, options),
        apps: build::plan_apps(facts, manifests),
    }
}

/// The desired version of every (cluster, app) of the repo written at `dir`.
fn desired(dir: &Path) -> BTreeMap<(String, String), String> {
    let (_, assigned) = fleetscope_renderer::plan(dir).unwrap_or_else(|err| panic!("{err}"));
    write::desired_versions(&assigned)
        .into_iter()
        .map(|((c, a), v)| ((c.to_owned(), a.to_owned()), v.to_owned()))
        .collect()
}

const NAMES: &[&str] = &["podinfo", "checkout", "shop.api", "apps"];
const NAMESPACES: &[&str] = &["flux-system", "shop", "argocd"];
const VERSIONS: &[&str] = &["1.0.0", "1.1.0", "v2", "main"];
const KINDS: &[ObjectKind] = &[
    ObjectKind::HelmRelease,
    ObjectKind::Kustomization,
    ObjectKind::Application,
];

/// A random fleet: clusters placed by a render, added by `--auto-register` or only heard
/// from, and objects of few names (so that names meet on one cluster in several namespaces),
/// some stamped, some matched by a rule, most taken by none; some without a version.
fn fleet() -> impl Strategy<Value = FleetFacts> {
    let cluster = (0..3usize, 0..2usize, any::<bool>());
    let object = (
        0..8usize,
        0..KINDS.len(),
        0..NAMESPACES.len(),
        0..NAMES.len(),
        proptest::option::weighted(0.9, 0..VERSIONS.len()),
        0..4usize,
    );
    (
        proptest::collection::vec(cluster, 1..8),
        proptest::collection::vec(object, 0..40),
    )
        .prop_map(|(clusters, objects)| {
            let mut facts = FleetFacts::default();
            for (i, (placement, env, labelled)) in clusters.iter().enumerate() {
                let known = match placement {
                    0 => None,
                    1 => Some(KnownCluster {
                        group: "unassigned".into(),
                        environment: "unknown".into(),
                        reconciler: "unknown".into(),
                        ..KnownCluster::default()
                    }),
                    _ => Some(KnownCluster {
                        group: format!("emea/site-{}", i % 3),
                        environment: ["prod", "stage"][*env].into(),
                        reconciler: "flux".into(),
                        labels: if *labelled {
                            [("tier".to_owned(), "edge".to_owned())].into()
                        } else {
                            Default::default()
                        },
                    }),
                };
                facts.clusters.insert(format!("store-{i}"), known);
            }
            let n = clusters.len();
            let mut seen = BTreeSet::new();
            for (cluster, kind, namespace, name, version, how) in objects {
                let cluster = format!("store-{}", cluster % n);
                let key = (cluster.clone(), kind, namespace, name);
                if !seen.insert(key) {
                    continue;
                }
                let (app, stamped) = match how {
                    0 => (Some(format!("stamped-{}", name % 2)), true),
                    1 => (Some("matched".to_owned()), false),
                    _ => (None, false),
                };
                facts.objects.push(RunningObject {
                    cluster,
                    kind: KINDS[kind],
                    namespace: NAMESPACES[namespace].into(),
                    name: NAMES[name].into(),
                    app,
                    version: version.map(|v| VERSIONS[v].to_owned()),
                    stamped,
                });
            }
            facts.rules.insert(
                "matched".into(),
                vec![MatchRule {
                    name: Some("matched-*".into()),
                    ..MatchRule::default()
                }],
            );
            facts
        })
}

/// For any fleet, the repo checks, and its desired state is what runs: every (cluster, app)
/// that runs a version is desired at that version there, and nothing is desired where the app
/// does not run.
#[test]
fn the_imported_repo_desires_exactly_what_runs() {
    let mut runner = TestRunner::new(Config {
        cases: 64,
        failure_persistence: None,
        ..Config::default()
    });
    let pinned = std::cell::Cell::new(0);
    let renamed = std::cell::Cell::new(0);
    runner
        .run(&fleet(), |facts| {
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("platform");
            let plan = plan(&facts, &Manifests::default(), &[], &options());
            let written = write::write(&target, &plan, &options())
                .map_err(|err| TestCaseError::fail(format!("{err:#}")))?;
            let desired = desired(&target);
            let mut expected = BTreeMap::new();
            let mut runs = BTreeSet::new();
            for app in plan.apps.values() {
                for (cluster, version) in &app.running {
                    runs.insert((cluster.clone(), app.name.clone()));
                    if let Some(version) = version {
                        expected.insert((cluster.clone(), app.name.clone()), version.clone());
                    }
                }
                pinned.set(
                    pinned.get()
                        + usize::from(
                            app.running
                                .values()
                                .flatten()
                                .collect::<BTreeSet<_>>()
                                .len()
                                > 1,
                        ),
                );
                renamed.set(
                    renamed.get()
                        + usize::from(
                            app.name.contains("-flux-system") || app.name.contains("-shop"),
                        ),
                );
            }
            // Desired where it runs, nowhere else; at the running version where one shows.
            prop_assert_eq!(desired.keys().cloned().collect::<BTreeSet<_>>(), runs);
            for (pair, version) in &expected {
                prop_assert_eq!(desired.get(pair), Some(version), "{:?}", pair);
            }
            prop_assert_eq!(written.desired_equal, expected.len());
            // One file per app.
            let files = std::fs::read_dir(target.join("apps"))
                .map(|entries| entries.count())
                .unwrap_or(0);
            prop_assert_eq!(files, plan.apps.len());
            Ok(())
        })
        .unwrap();
    let (pinned, renamed) = (pinned.get(), renamed.get());
    assert!(pinned > 5, "only {pinned} apps ran two versions");
    assert!(
        renamed > 5,
        "only {renamed} apps were named with their namespace"
    );
}

/// Two objects of one name in two namespaces of one cluster are two apps; the same name on
/// different clusters (a HelmRelease on Flux clusters, an Application on Argo CD ones) is one
/// app with a rule for each.
#[test]
fn names_meet_as_one_app_across_clusters_and_two_on_one() {
    let object = |cluster: &str, kind, namespace: &str, name: &str| RunningObject {
        cluster: cluster.into(),
        kind,
        namespace: namespace.into(),
        name: name.into(),
        app: None,
        version: Some("6.5.0".into()),
        stamped: false,
    };
    let mut facts = FleetFacts::default();
    for id in ["a", "b", "c"] {
        facts.clusters.insert(id.into(), None);
    }
    facts.objects = vec![
        object("a", ObjectKind::HelmRelease, "shop", "podinfo"),
        object("b", ObjectKind::Application, "argocd", "podinfo"),
        object("c", ObjectKind::Kustomization, "flux-system", "apps"),
        object("c", ObjectKind::Kustomization, "team-a", "apps"),
    ];
    let plan = plan(&facts, &Manifests::default(), &[], &options());
    let names: Vec<&str> = plan.apps.keys().map(String::as_str).collect();
    assert_eq!(names, ["apps-flux-system", "apps-team-a", "podinfo"]);
    assert_eq!(plan.apps["podinfo"].identities.len(), 2);
    let reconcilers: Vec<(&str, &str)> = plan
        .clusters
        .iter()
        .map(|c| (c.id.as_str(), c.reconciler.as_str()))
        .collect();
    assert_eq!(reconcilers, [("a", "flux"), ("b", "argocd"), ("c", "flux")]);
}

const FLUX_REPO: &str = r#"apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {name: podinfo, namespace: flux-system}
spec: {url: "https://stefanprodan.github.io/podinfo", interval: 10m}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: podinfo, namespace: shop}
spec:
  interval: 10m
  targetNamespace: web
  chart:
    spec:
      chart: podinfo
      version: "6.5.x"
      sourceRef: {kind: HelmRepository, name: podinfo, namespace: flux-system}
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: fleet-infra, namespace: flux-system}
spec: {url: "https://github.com/example/fleet-infra", ref: {branch: main}, interval: 1m}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: infrastructure, namespace: flux-system}
spec: {path: ./infrastructure, prune: true, interval: 10m, sourceRef: {kind: GitRepository, name: fleet-infra}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
"#;

const ARGO_APPS: &str = r#"apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: guestbook, namespace: argocd}
spec:
  project: default
  source: {repoURL: "https://github.com/argoproj/argocd-example-apps.git", path: guestbook, targetRevision: v1.2.0}
  destination: {server: "https://kubernetes.default.svc", namespace: guestbook}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: redis, namespace: argocd}
spec:
  project: default
  sources:
    - {repoURL: "https://charts.bitnami.com/bitnami", chart: redis, targetRevision: 18.1.0}
  destination: {server: "https://kubernetes.default.svc", namespace: cache}
"#;

/// Flux and Argo CD manifests give each app its source, namespace, kind and version; a fleet
/// object of the same kind, namespace and name is that app's object.
#[test]
fn manifests_give_apps_their_sources() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("flux.yaml"), FLUX_REPO).unwrap();
    std::fs::create_dir(dir.path().join("argo")).unwrap();
    std::fs::write(dir.path().join("argo/apps.yml"), ARGO_APPS).unwrap();
    let manifests = files::read_manifests(&[dir.path().to_owned()]).unwrap();
    assert_eq!((manifests.files, manifests.skipped), (2, 3));
    let by_name: BTreeMap<&str, &files::DeclaredApp> = manifests
        .apps
        .iter()
        .map(|a| (a.name.as_str(), a))
        .collect();
    assert_eq!(
        by_name.keys().copied().collect::<Vec<_>>(),
        ["guestbook", "infrastructure", "podinfo", "redis"]
    );
    assert_eq!(
        by_name["podinfo"].source,
        AppSource::Helm {
            repository: "https://stefanprodan.github.io/podinfo".into(),
            chart: "podinfo".into()
        }
    );
    assert_eq!(by_name["podinfo"].app_namespace, "web");
    assert_eq!(by_name["podinfo"].version.as_deref(), Some("6.5.x"));
    assert_eq!(
        by_name["infrastructure"].source,
        AppSource::Git {
            url: "https://github.com/example/fleet-infra".into(),
            path: "./infrastructure".into(),
            reference: "main".into()
        }
    );
    assert_eq!(by_name["guestbook"].version.as_deref(), Some("v1.2.0"));
    assert_eq!(by_name["redis"].app_namespace, "cache");
    assert!(matches!(&by_name["redis"].source, AppSource::Helm { chart, .. } if chart == "redis"));

    // podinfo runs on one cluster at 6.5.2: the app is the manifest's, at the running version.
    let mut facts = FleetFacts::default();
    facts.clusters.insert("store-1".into(), None);
    facts.objects.push(RunningObject {
        cluster: "store-1".into(),
        kind: ObjectKind::HelmRelease,
        namespace: "shop".into(),
        name: "podinfo".into(),
        app: None,
        version: Some("6.5.2".into()),
        stamped: false,
    });
    let plan = plan(&facts, &manifests, &[], &options());
    let target = dir.path().join("platform");
    let written = write::write(&target, &plan, &options()).unwrap();
    assert_eq!((written.running, written.desired_equal), (1, 1));
    let podinfo = std::fs::read_to_string(target.join("apps/podinfo.yaml")).unwrap();
    for line in [
        "version: 6.5.2",
        "repository: https://stefanprodan.github.io/podinfo",
        "namespace: web",
        "- kind: HelmRelease\n  name: podinfo\n  namespace: shop",
    ] {
        assert!(podinfo.contains(line), "{line:?} not in\n{podinfo}");
    }
    assert!(!podinfo.contains("placeholder"), "{podinfo}");
    // Apps no cluster runs are written without a policy, and say so.
    let redis = std::fs::read_to_string(target.join("apps/redis.yaml")).unwrap();
    assert!(
        redis.contains("No reporting cluster runs this app") && !redis.contains("kind: Policy"),
        "{redis}"
    );
}

/// Bad manifests and a bad inventory are refused with every problem, each naming its file and
/// field, and nothing is written.
#[test]
fn bad_input_names_the_file_and_the_field_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec: {chart: {spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}}}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: api}\nspec: {destination: {namespace: api}}\n---\n: [\n",
    )
    .unwrap();
    let errors = files::read_manifests(std::slice::from_ref(&bad)).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let file = bad.display().to_string();
    assert_eq!(errors.len(), 3, "{text:#?}");
    assert!(
        text[0].starts_with(&format!("{file}#3: not YAML")),
        "{text:#?}"
    );
    assert!(text.contains(&format!("{file}#1 spec.chart.spec.sourceRef: HelmRepository shop/charts is not among the manifests given (pass the file that declares it with --manifests)")), "{text:#?}");
    assert!(
        text.contains(&format!("{file}#2 spec.source: is required")),
        "{text:#?}"
    );

    let csv = dir.path().join("clusters.csv");
    std::fs::write(
        &csv,
        "cluster,group,environment,reconciler,region\n# a comment\nberlin-01,emea/de,prod,flux,emea\nBerlin_02,emea/de,Prod,rancher,emea\nberlin-01,emea/de,prod,flux,emea\nmunich-01,emea/de\n\"paris-01\",\"emea/fr\",prod,argocd,\"eu west\"\n",
    )
    .unwrap();
    let errors = files::read_inventory(&csv).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let file = csv.display().to_string();
    for want in [
        format!("{file}:4 cluster: "),
        format!("{file}:4 environment: "),
        format!("{file}:4 reconciler: \"rancher\" is not a reconciler (flux or argocd)"),
        format!("{file}:5 cluster: cluster \"berlin-01\" is also on {file}:3"),
        format!("{file}:6: 2 fields, the header has 5"),
        format!("{file}:7 region: "),
    ] {
        assert!(
            text.iter().any(|t| t.starts_with(&want)),
            "{want:?} not in {text:#?}"
        );
    }
    assert_eq!(errors.len(), 6, "{text:#?}");
}

/// A repo that would not check (a cluster id too long to select by label) is not written,
/// and the target is refused when it holds anything.
#[test]
fn nothing_half_done() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("platform");
    let mut facts = FleetFacts::default();
    let long = format!("store-{}", "x".repeat(70));
    for id in [long.as_str(), "store-1"] {
        facts.clusters.insert(id.into(), None);
    }
    facts.objects.push(RunningObject {
        cluster: long.clone(),
        kind: ObjectKind::HelmRelease,
        namespace: "shop".into(),
        name: "web".into(),
        app: None,
        version: Some("1.0.0".into()),
        stamped: false,
    });
    let plan = plan(&facts, &Manifests::default(), &[], &options());
    let err = write::write(&target, &plan, &options()).unwrap_err();
    assert!(
        format!("{err:#}").contains("the imported repo does not check, so nothing was written"),
        "{err:#}"
    );
    assert!(!target.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep.yaml"), "kind: Environment\nname: prod\n").unwrap();
    let err = write::check_target(&target).unwrap_err();
    assert!(err.to_string().contains("is not empty"), "{err}");
    // An empty directory is taken.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    write::check_target(&empty).unwrap();
}

/// Groups from the labels clusters carry; the CSV places and labels clusters first.
#[test]
fn groups_come_from_the_inventory_and_the_labels() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("clusters.csv");
    std::fs::write(
        &csv,
        "cluster,environment,region,Country\nberlin-01,prod,EMEA,de\nparis-01,prod,emea,\nnyc-01,stage,amer,us\n",
    )
    .unwrap();
    let inventory = files::read_inventory(&csv).unwrap_or_else(|e| panic!("{e:?}"));
    let mut facts = FleetFacts::default();
    facts.clusters.insert(
        "lab-01".into(),
        Some(KnownCluster {
            group: "emea/lab".into(),
            environment: "stage".into(),
            reconciler: "argocd".into(),
            labels: [("region".to_owned(), "emea".to_owned())].into(),
        }),
    );
    let options = Options {
        group_labels: vec!["region".into(), "Country".into()],
        ..options()
    };
    let clusters = build::plan_clusters(&facts, &inventory, &options);
    let placed: Vec<(&str, &str, &str, &str)> = clusters
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.group.as_str(),
                c.environment.as_str(),
                c.reconciler.as_str(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        [
            ("berlin-01", "emea/de", "prod", "flux"),
            ("lab-01", "emea/lab", "stage", "argocd"),
            ("nyc-01", "amer/us", "stage", "flux"),
            ("paris-01", "unassigned", "prod", "flux"),
        ]
    );
    assert_eq!(
        clusters[0].labels.get("region").map(String::as_str),
        Some("EMEA")
    );
}

/// The renderer's compiled selectors (sets for long value lists, as import's policies have)
/// select exactly what the model's selectors select.
#[test]
fn compiled_selectors_select_what_selectors_select() {
    use fleetscope_model::{ClusterSelector, GroupPath, LabelRequirement, Operator};
    use fleetscope_renderer::assign::CompiledSelector;
    let value =
        || proptest::sample::select(vec!["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"]);
    let requirement = (
        proptest::sample::select(vec!["x", "y"]),
        proptest::sample::select(vec![
            Operator::In,
            Operator::NotIn,
            Operator::Exists,
            Operator::DoesNotExist,
        ]),
        proptest::collection::vec(value(), 0..12),
    )
        .prop_map(|(key, operator, values)| LabelRequirement {
            key: key.into(),
            operator,
            values: values.into_iter().map(str::to_owned).collect(),
        });
    let selector = (
        proptest::collection::btree_map(proptest::sample::select(vec!["x", "y"]), value(), 0..2),
        proptest::collection::vec(requirement, 0..3),
        proptest::collection::vec(
            proptest::sample::select(vec!["emea", "emea/de", "amer"]),
            0..2,
        ),
    )
        .prop_map(|(labels, match_expressions, groups)| ClusterSelector {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            match_expressions,
            groups: groups
                .into_iter()
                .map(|g| GroupPath::parse(g).unwrap())
                .collect(),
        });
    let labels = proptest::collection::btree_map(
        proptest::sample::select(vec!["x", "y", "z"]),
        value(),
        0..3,
    );
    let group = proptest::sample::select(vec!["emea/de/berlin", "emea/fr", "amer/us"]);
    let mut runner = TestRunner::new(Config {
        cases: 2_000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&(selector, labels, group), |(selector, labels, group)| {
            let labels = labels
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            let group = GroupPath::parse(group).unwrap();
            prop_assert_eq!(
                CompiledSelector::new(&selector).matches(&labels, &group),
                selector.matches(&labels, &group)
            );
            Ok(())
        })
        .unwrap();
}
