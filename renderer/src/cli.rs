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

/// Runs `fleetscope render`.
pub fn run(args: RenderArgs) -> anyhow::Result<()> {
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
        let (files, _) = crate::output::render_files(&platform, &assigned);
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
    let outcome = crate::render(&args.platform, &output)?;
    println!("{}", outcome.summary);
    match &outcome.commit.commit {
        Some(commit) => println!("commit {commit} in {}", output.display()),
        None => println!(
            "no commit: the output already matches (head {})",
            outcome.commit.head
        ),
    }
    if args.push {
        let repo = crate::git::open_or_init(&output)?;
        crate::git::push(&repo).context("pushing to origin")?;
        println!("pushed main to origin");
    }
    Ok(())
}
