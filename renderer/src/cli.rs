//! `fleetscope render` and `fleetscope render explain`.

use std::path::PathBuf;

use anyhow::Context as _;
use fleetscope_model::{AppName, ClusterId};

#[derive(Debug, Clone, clap::Args)]
pub struct RenderArgs {
    /// The platform repo (a directory of YAML documents).
    #[arg(long, env = "FLEETSCOPE_PLATFORM", default_value = "examples/platform")]
    pub platform: PathBuf,
    /// The GitOps output repository (created if missing).
    #[arg(long, env = "FLEETSCOPE_OUTPUT")]
    pub output: Option<PathBuf>,
    /// Push branch main to the output repository's `origin` after committing.
    #[arg(long)]
    pub push: bool,
    /// Validate and print what would be rendered; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also write the desired state into this ClickHouse (HTTP endpoint).
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_URL")]
    pub clickhouse_url: Option<String>,
    #[arg(
        long,
        env = "FLEETSCOPE_CLICKHOUSE_DATABASE",
        default_value = "fleetscope"
    )]
    pub clickhouse_database: String,
    #[command(subcommand)]
    pub command: Option<RenderCommand>,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum RenderCommand {
    /// Say why each app is, or is not, desired on a cluster.
    Explain {
        cluster: String,
        app: Option<String>,
    },
}

/// At most five warnings, then how many more.
fn print_warnings(warnings: &[String]) {
    for warning in warnings.iter().take(5) {
        eprintln!("warning: {warning}");
    }
    if warnings.len() > 5 {
        eprintln!("warning: … and {} more like these", warnings.len() - 5);
    }
}

/// Runs `fleetscope render`.
pub async fn run(args: RenderArgs) -> anyhow::Result<()> {
    if let Some(RenderCommand::Explain { cluster, app }) = &args.command {
        let (platform, assigned) = crate::plan(&args.platform)?;
        print!(
            "{}",
            crate::explain::explain(
                &platform,
                &assigned,
                &ClusterId::parse(cluster)?,
                app.as_deref().map(AppName::parse).transpose()?.as_ref()
            )?
        );
        return Ok(());
    }
    if args.dry_run {
        let (platform, assigned) = crate::plan(&args.platform)?;
        let (files, _) =
            crate::output::render_files(&platform, &assigned, &Default::default(), false);
        print_warnings(&crate::warnings(&assigned));
        println!(
            "valid: {} clusters, {} apps, {} policies → {} render groups, {} files (dry run, nothing written)",
            platform.clusters.len(),
            platform.apps.len(),
            platform.policies.len(),
            assigned.groups.len(),
            files.len()
        );
        return Ok(());
    }
    let output = args
        .output
        .clone()
        .context("--output is required (or --dry-run)")?;
    let store = match &args.clickhouse_url {
        Some(url) => {
            let store = fleetscope_store::Store::connect(&fleetscope_store::StoreConfig::new(
                url.clone(),
                args.clickhouse_database.clone(),
            ))?;
            store.migrate().await.context("applying the schema")?;
            Some(store)
        }
        None => None,
    };
    let outcome = match crate::render_if_changed(&args.platform, &output)? {
        Some(outcome) => Some(outcome),
        None => {
            // The output is up to date; the desired state may not be, if publishing it failed
            // last time. Then the render runs again (committing nothing) to publish it.
            let head = crate::git::head_commit(&crate::git::open_or_init(&output)?);
            let published = match &store {
                Some(store) => store
                    .last_render_commit()
                    .await
                    .context("reading the last published render")?,
                None => None,
            };
            if store.is_none() || published == head {
                println!("render: nothing changed (the platform repo is byte for byte what the last commit in {} was rendered from)", output.display());
                None
            } else {
                println!(
                    "render: the output is up to date, but its desired state was not published; publishing {}",
                    head.as_deref().unwrap_or("(no commit)")
                );
                Some(crate::render(&args.platform, &output)?)
            }
        }
    };
    if let Some(outcome) = &outcome {
        print_warnings(&outcome.warnings);
        println!("{}", outcome.summary);
        match &outcome.commit.commit {
            Some(commit) => println!("commit {commit} in {}", output.display()),
            None => println!(
                "no commit: the output already matches (head {})",
                outcome.commit.head
            ),
        }
    }
    if let (Some(store), Some(outcome)) = (&store, &outcome) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
        let published = crate::desired::publish(
            store,
            outcome,
            now.as_millis() as u64,
            fleetscope_model::Timestamp(now.as_secs() as i64),
        )
        .await?;
        println!(
            "desired state in clickhouse: render {}, {} desired rows, {} removed, {} memberships, {} cluster rows",
            published.render_id, published.desired_rows, published.removed_rows, published.membership_rows, published.cluster_rows
        );
    }
    if args.push {
        let repo = crate::git::open_or_init(&output)?;
        crate::git::push(&repo).context("pushing to origin")?;
        println!("pushed main to origin");
    }
    Ok(())
}
