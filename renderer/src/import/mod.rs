//! `fleetscope import`: a starting platform repo from what already runs. It reads what the
//! agents reported (from ClickHouse), Argo CD and Flux manifests a team already has, and a
//! cluster inventory as CSV, and writes environments, clusters, apps with match rules for
//! their objects, namespaces and policies that put every app where it runs at the version it
//! runs there. The repo is checked as `render` checks it before anything is written, and it
//! is written whole or not at all.

pub mod build;
pub mod facts;
pub mod files;
pub mod write;

use std::path::PathBuf;

use anyhow::Context as _;

#[derive(Debug, Clone, clap::Args)]
pub struct ImportArgs {
    /// The platform repo to write: a directory that does not exist yet or is empty.
    #[arg(long)]
    pub platform: PathBuf,
    /// Read what the agents reported from this ClickHouse (HTTP endpoint).
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_URL")]
    pub clickhouse_url: Option<String>,
    #[arg(
        long,
        env = "FLEETSCOPE_CLICKHOUSE_DATABASE",
        default_value = "fleetscope"
    )]
    pub clickhouse_database: String,
    /// ClickHouse user to read as (the server's default user if not given).
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_USER")]
    pub clickhouse_user: Option<String>,
    /// Its password; prefer the variable, a flag shows in the process list.
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_PASSWORD", hide_env_values = true)]
    pub clickhouse_password: Option<String>,
    /// Argo CD `Application` and Flux `Kustomization`/`HelmRelease` manifests (files or
    /// directories; the `GitRepository`, `OCIRepository` and `HelmRepository` they name among
    /// them). Repeat for more.
    #[arg(long, value_name = "PATH")]
    pub manifests: Vec<PathBuf>,
    /// A cluster inventory as CSV: a header with `cluster` and any of `group`, `environment`,
    /// `reconciler`; every other column is a label.
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// Cluster labels whose values, in this order, make each cluster's group path
    /// (`--group-labels region,country,site`).
    #[arg(long, value_delimiter = ',', value_name = "LABELS")]
    pub group_labels: Vec<String>,
    /// The URL Argo CD clusters would pull rendered output from (the `GitOpsRepository`
    /// document; a placeholder when not given).
    #[arg(long)]
    pub gitops_url: Option<String>,
    /// The owners written for every namespace (repeat for more).
    #[arg(long = "namespace-owner", default_value = "platform")]
    pub namespace_owners: Vec<String>,
}

/// Runs `fleetscope import`.
pub async fn run(args: ImportArgs) -> anyhow::Result<()> {
    write::check_target(&args.platform)?;
    if args.clickhouse_url.is_none() && args.manifests.is_empty() && args.inventory.is_none() {
        anyhow::bail!(
            "nothing to import from: give --clickhouse-url (what the agents report), --manifests or --inventory"
        );
    }
    let manifests = files::read_manifests(&args.manifests).map_err(input_problems)?;
    let inventory = match &args.inventory {
        Some(path) => files::read_inventory(path).map_err(input_problems)?,
        None => Vec::new(),
    };
    for label in &args.group_labels {
        fleetscope_model::selector::validate_label_key(label)
            .map_err(|err| anyhow::anyhow!("--group-labels {label:?}: {err}"))?;
    }
    let facts = match &args.clickhouse_url {
        Some(url) => {
            let store = fleetscope_store::Store::connect(&fleetscope_store::StoreConfig {
                user: args.clickhouse_user.clone(),
                password: args.clickhouse_password.clone(),
                cluster: None,
                ..fleetscope_store::StoreConfig::new(url, &args.clickhouse_database)
            })
            .context("connecting to ClickHouse")?;
            facts::read(&store)
                .await
                .with_context(|| format!("reading what the agents reported from {url}"))?
        }
        None => facts::FleetFacts::default(),
    };
    let options = build::Options {
        group_labels: args.group_labels.clone(),
        gitops_url: args.gitops_url.clone(),
        owners: args.namespace_owners.clone(),
    };
    let plan = build::Plan {
        clusters: build::plan_clusters(&facts, &inventory, &options),
        apps: build::plan_apps(&facts, &manifests),
    };
    let written = write::write(&args.platform, &plan, &options)?;
    println!("{}", written.summary(&plan, &manifests));
    println!(
        "next: fleetscope render --publish-only --platform {} --clickhouse-url …",
        args.platform.display()
    );
    Ok(())
}

fn input_problems(errors: Vec<files::InputError>) -> anyhow::Error {
    anyhow::anyhow!(
        "the input has {} problem(s); nothing written:\n  {}",
        errors.len(),
        errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n  ")
    )
}
