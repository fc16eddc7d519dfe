//! A generator of large platform repos for benchmarks and the load test: N clusters in a
//! region/country/site hierarchy, M apps of every source kind in team namespaces, and policies
//! that mix environment pins, regional apps, flagship overlays and canaries, so a fleet gets a
//! realistic number of render groups. Deterministic for a given size.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

const REGIONS: &[(&str, &[&str])] = &[
    ("emea", &["de", "fr", "uk", "es", "it", "nl", "pl", "se"]),
    ("amer", &["us", "ca", "br", "mx"]),
    ("apac", &["jp", "au", "sg", "in", "kr"]),
];
const TEAMS: &[&str] = &[
    "shop",
    "payments",
    "logistics",
    "platform",
    "data",
    "security",
    "media",
    "store-ops",
    "hr",
    "finance",
];

/// Writes a platform repo with `clusters` clusters and `apps` apps into `dir` (created).
pub fn generate(dir: &Path, clusters: usize, apps: usize) -> std::io::Result<()> {
    generate_with(dir, clusters, apps, false)
}

/// [`generate`], every app with a match rule when `match_rules` is set: its objects are
/// recognised by name without stamps, their version read from the label
/// `app.kubernetes.io/version` (the load test's `--unstamped`).
pub fn generate_with(
    dir: &Path,
    clusters: usize,
    apps: usize,
    match_rules: bool,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("clusters"))?;
    std::fs::create_dir_all(dir.join("apps"))?;
    std::fs::create_dir_all(dir.join("policies"))?;
    let mut text = String::new();
    for env in ["dev", "stage", "prod"] {
        let _ = write!(text, "kind: Environment\nname: {env}\n---\n");
    }
    std::fs::write(dir.join("environments.yaml"), &text)?;
    std::fs::write(
        dir.join("gitops.yaml"),
        "kind: GitOpsRepository\nurl: https://git.example.com/platform/fleet-gitops.git\n",
    )?;

    text.clear();
    for (region, countries) in REGIONS {
        let _ = write!(
            text,
            "kind: Group\npath: {region}\nlabels: {{region: {region}}}\n---\n"
        );
        for country in *countries {
            let _ = write!(
                text,
                "kind: Group\npath: {region}/{country}\nlabels: {{country: {country}}}\n---\n"
            );
        }
    }
    std::fs::write(dir.join("groups.yaml"), &text)?;

    // Clusters, one file per country, as a platform team would split them.
    let mut per_country: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for i in 0..clusters {
        let (region, countries) = REGIONS[i % REGIONS.len()];
        let country = countries[(i / REGIONS.len()) % countries.len()];
        let site = format!("site-{:03}", (i / 97) % 200);
        let environment = match i % 100 {
            0..=1 => "dev",
            2..=6 => "stage",
            _ => "prod",
        };
        let reconciler = if i % 10 < 3 { "argocd" } else { "flux" };
        let tier = if i % 20 == 0 { "flagship" } else { "standard" };
        let canary = if i % 50 == 7 {
            ", canary: \"true\""
        } else {
            ""
        };
        let _ = write!(
            per_country.entry((region, country)).or_default(),
            "kind: Cluster\nid: {country}-{site}-{i:06}\ngroup: {region}/{country}/{site}\nenvironment: {environment}\nreconciler: {reconciler}\nlabels: {{tier: {tier}{canary}}}\nvalues: {{storeNumber: \"{i:06}\"}}\n---\n"
        );
    }
    for ((region, country), text) in per_country {
        let folder = dir.join("clusters").join(region);
        std::fs::create_dir_all(&folder)?;
        std::fs::write(folder.join(format!("{country}.yaml")), text)?;
    }

    // Apps in team namespaces; every third a Helm chart, every seventh an OCI artifact.
    text.clear();
    for team in TEAMS {
        let members: Vec<String> = (0..apps)
            .filter(|a| TEAMS[a % TEAMS.len()] == *team)
            .map(|a| format!("app-{a:03}"))
            .collect();
        let _ = write!(text, "kind: Namespace\nname: {team}\nowners: [team-{team}]\nquota: {{requests.cpu: \"8\"}}\ndefaultLimits: {{memory: 512Mi}}\napps: [{}]\n---\n", members.join(", "));
    }
    for a in 0..apps {
        let team = TEAMS[a % TEAMS.len()];
        let (reconciler, source) = if a % 3 == 0 {
            ("flux-helmrelease", format!("{{type: helm, repository: \"https://charts.example.com/{team}\", chart: app-{a:03}}}"))
        } else if a % 7 == 0 {
            (
                "flux-kustomization",
                format!("{{type: oci, url: \"oci://registry.example.com/{team}/app-{a:03}\"}}"),
            )
        } else {
            ("flux-kustomization", format!("{{type: git, url: \"https://git.example.com/{team}/app-{a:03}.git\", path: ./deploy, ref: main}}"))
        };
        let depends = if a % 10 == 5 {
            format!("dependsOn: [app-{:03}]\n", a - 5)
        } else {
            String::new()
        };
        let scope = if a % 10 == 9 { "regional" } else { "base" };
        let rules = if match_rules {
            format!("match: [{{name: app-{a:03}, versionFrom: label, label: app.kubernetes.io/version}}]\n")
        } else {
            String::new()
        };
        let _ = write!(
            text,
            "kind: Application\nname: app-{a:03}\nversion: 1.{}.{}\nnamespace: {team}\nreconciler: {reconciler}\nsource: {source}\n{depends}labels: {{team: {team}, scope: {scope}}}\nvalues: {{replicas: 2}}\n{rules}---\n",
            a % 9,
            a % 4
        );
    }
    std::fs::write(dir.join("apps/apps.yaml"), &text)?;

    text.clear();
    let _ = write!(text, "kind: Policy\nname: base\napps: {{matchExpressions: [{{key: scope, operator: In, values: [base]}}]}}\n---\n");
    for (region, _) in REGIONS {
        let _ = write!(text, "kind: Policy\nname: regional-{region}\napps: {{matchExpressions: [{{key: scope, operator: In, values: [regional]}}]}}\nclusters: {{groups: [{region}]}}\n---\n");
    }
    // Per-store values by substitution, which only Flux performs, for the apps every store runs.
    let _ = write!(text, "kind: Policy\nname: store-number\npriority: 1\napps: {{matchExpressions: [{{key: scope, operator: In, values: [base]}}]}}\nclusters: {{matchExpressions: [{{key: fleetscope.io/reconciler, operator: In, values: [flux]}}]}}\nvalues: {{store: \"${{storeNumber}}\"}}\n---\n");
    let _ = write!(text, "kind: Policy\nname: flagship-capacity\npriority: 10\napps: {{matchExpressions: [{{key: team, operator: In, values: [shop, payments]}}]}}\nclusters: {{matchLabels: {{tier: flagship}}}}\nvalues: {{replicas: 6}}\n---\n");
    let _ = write!(text, "kind: Policy\nname: prod-pins\npriority: 5\napps: {{matchExpressions: [{{key: team, operator: In, values: [finance, hr]}}]}}\nclusters: {{matchExpressions: [{{key: fleetscope.io/environment, operator: In, values: [prod]}}]}}\nversion: 1.0.0\n---\n");
    // Country editions: each country runs its own pick of the regional apps' values, and
    // environments pin the data team's apps differently, so fleets split into many groups.
    for (region, countries) in REGIONS {
        for (index, country) in countries.iter().enumerate() {
            let _ = write!(
                text,
                "kind: Policy\nname: edition-{country}\npriority: 3\napps: {{matchExpressions: [{{key: team, operator: In, values: [shop, media]}}]}}\nclusters: {{groups: [{region}/{country}]}}\nvalues: {{edition: {country}, locale: \"{country}-{index}\"}}\n---\n"
            );
        }
    }
    for (environment, version) in [("dev", "3.0.0-dev"), ("stage", "2.9.0")] {
        let _ = write!(
            text,
            "kind: Policy\nname: data-{environment}\npriority: 6\napps: {{matchExpressions: [{{key: team, operator: In, values: [data]}}]}}\nclusters: {{matchExpressions: [{{key: fleetscope.io/environment, operator: In, values: [{environment}]}}]}}\nversion: {version}\n---\n"
        );
    }
    let _ = write!(text, "kind: Policy\nname: canary\npriority: 20\napps: {{names: [app-001, app-002]}}\nclusters: {{matchLabels: {{canary: \"true\"}}}}\nversion: 2.0.0-rc.1\n---\n");
    std::fs::write(dir.join("policies/policies.yaml"), &text)?;
    Ok(())
}
