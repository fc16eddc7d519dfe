//! `fleetscope render` and `fleetscope render explain`.
//!
//! One pass renders the platform repo if it changed since the output's last commit, publishes
//! the desired state to ClickHouse if it is not there yet, and pushes. With `--every SECONDS`
//! the command keeps going: a pass, a pause, a pass, until SIGTERM or Ctrl-C. A pass that fails
//! (an invalid platform repo, ClickHouse or the remote out of reach) is reported and the next
//! one tries again; nothing is written by a failed render, so the last good output stays.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// Publish the desired state into ClickHouse (`--clickhouse-url`) with no GitOps output,
    /// for a fleet whose manifests come from elsewhere: nothing is rendered or committed, and
    /// the apps' objects are recognised by their `match` rules.
    #[arg(long, conflicts_with_all = ["output", "push", "dry_run"])]
    pub publish_only: bool,
    /// Also write the desired state into this ClickHouse (HTTP endpoint).
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_URL")]
    pub clickhouse_url: Option<String>,
    #[arg(
        long,
        env = "FLEETSCOPE_CLICKHOUSE_DATABASE",
        default_value = "fleetscope"
    )]
    pub clickhouse_database: String,
    #[command(flatten)]
    pub service: ServiceArgs,
    #[command(subcommand)]
    pub command: Option<RenderCommand>,
}

/// What running the renderer as a long-lived service needs: the interval, and the credentials
/// of a ClickHouse whose default user is not the one to publish as.
#[derive(Debug, Clone, clap::Args)]
pub struct ServiceArgs {
    /// Keep running: render again whenever the platform repo changed, checking every SECONDS
    /// (counted from the end of one pass to the start of the next), until SIGTERM or Ctrl-C.
    /// A failing pass is reported and retried at the next one.
    #[arg(
        long,
        env = "FLEETSCOPE_RENDER_EVERY",
        value_name = "SECONDS",
        value_parser = clap::value_parser!(u64).range(1..),
        conflicts_with = "dry_run"
    )]
    pub every: Option<u64>,
    /// ClickHouse user to publish the desired state as (the server's default user if not given).
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_USER")]
    pub clickhouse_user: Option<String>,
    /// Its password; prefer the variable, a flag shows in the process list.
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_PASSWORD", hide_env_values = true)]
    pub clickhouse_password: Option<String>,
    /// Publish to this ClickHouse cluster (its name in the servers' `remote_servers`), as the
    /// collector and hub do: give every component the same value (see docs/scaling.md).
    #[arg(long, env = "FLEETSCOPE_CLICKHOUSE_CLUSTER")]
    pub clickhouse_cluster: Option<String>,
    /// ZooKeeper path of the replicated tables in cluster mode; the database name follows it.
    #[arg(
        long,
        env = "FLEETSCOPE_CLICKHOUSE_ZOOKEEPER_PATH",
        default_value = fleetscope_store::clickhouse_cluster::DEFAULT_ZOOKEEPER_PATH
    )]
    pub clickhouse_zookeeper_path: String,
}

/// One pass, the server's default user, a single ClickHouse server: what the command line
/// gives when none of these flags is set.
impl Default for ServiceArgs {
    fn default() -> Self {
        ServiceArgs {
            every: None,
            clickhouse_user: None,
            clickhouse_password: None,
            clickhouse_cluster: None,
            clickhouse_zookeeper_path: fleetscope_store::clickhouse_cluster::DEFAULT_ZOOKEEPER_PATH
                .to_owned(),
        }
    }
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum RenderCommand {
    /// Say why each app is, or is not, desired on a cluster.
    Explain {
        cluster: String,
        app: Option<String>,
    },
}

/// The store `--clickhouse-url` names, with the service's credentials and cluster, if given.
fn connect_store(args: &RenderArgs) -> anyhow::Result<Option<fleetscope_store::Store>> {
    let store = match &args.clickhouse_url {
        Some(url) => Some(fleetscope_store::Store::connect(
            &fleetscope_store::StoreConfig {
                user: args.service.clickhouse_user.clone(),
                password: args.service.clickhouse_password.clone(),
                cluster: args.service.clickhouse_cluster.as_ref().map(|name| {
                    fleetscope_store::ClusterConfig {
                        name: name.clone(),
                        zookeeper_path: args.service.clickhouse_zookeeper_path.clone(),
                    }
                }),
                ..fleetscope_store::StoreConfig::new(url.clone(), args.clickhouse_database.clone())
            },
        )?),
        None => None,
    };
    Ok(store)
}

/// Publishes a render's desired state as of now, and says what it wrote.
async fn publish_and_say(
    store: &fleetscope_store::Store,
    outcome: &crate::RenderOutcome,
) -> anyhow::Result<()> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
    let published = crate::desired::publish(
        store,
        outcome,
        now.as_millis() as u64,
        fleetscope_model::Timestamp(now.as_secs() as i64),
    )
    .await?;
    println!(
        "desired state in clickhouse: render {}, {} desired rows, {} removed, {} memberships ({} with a desired since of their own), {} cluster rows, {} version changes; read {:.2} s, compared {:.2} s, wrote {:.2} s",
        published.render_id, published.desired_rows, published.removed_rows, published.membership_rows, published.member_since_rows, published.cluster_rows, published.version_change_rows,
        published.timings.read.as_secs_f64(), published.timings.compare.as_secs_f64(), published.timings.write.as_secs_f64()
    );
    Ok(())
}

/// `fleetscope render --publish-only`: one publication, or one per `--every` pass, each only
/// when the platform repo's files differ from what the last publication was made from.
async fn publish_only(args: &RenderArgs) -> anyhow::Result<()> {
    let store = connect_store(args)?
        .context("--publish-only publishes into ClickHouse: give --clickhouse-url")?;
    store.migrate().await.context("applying the schema")?;
    let shutdown = fleetscope_runtime::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        let platform = args.platform.clone();
        match blocking(move || crate::publish_only(&platform)).await {
            Ok(outcome) => {
                let published = store
                    .last_render_commit()
                    .await
                    .context("reading the last published render")?;
                if published.as_deref() == Some(outcome.commit.head.as_str()) {
                    if args.service.every.is_none() {
                        println!("publish: nothing changed (the platform repo is byte for byte what the last publication was made from)");
                    }
                } else {
                    println!("{}", outcome.summary);
                    publish_and_say(&store, &outcome).await?;
                }
            }
            Err(err) if args.service.every.is_some() => {
                eprintln!("publish: {err}");
            }
            Err(err) => return Err(err.into()),
        }
        let Some(every) = args.service.every else {
            return Ok(());
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(every)) => {}
            _ = &mut shutdown => return Ok(()),
        }
    }
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
        anyhow::ensure!(
            args.service.every.is_none(),
            "--every renders continuously; it does not go with explain"
        );
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
    if args.publish_only {
        return publish_only(&args).await;
    }
    if let Some(every) = args.service.every {
        // Installed before the first pass, so that a signal during it is not lost.
        let shutdown = fleetscope_runtime::shutdown_signal();
        let report = watch(args, Duration::from_secs(every), shutdown).await?;
        println!(
            "render: stopped after {} pass(es): {} commit(s), {} failed pass(es)",
            report.passes, report.commits, report.failures
        );
        return Ok(());
    }
    let mut renderer = Renderer::new(&args)?;
    renderer.pass(false).await?;
    Ok(())
}

/// What a run of [`watch`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchReport {
    /// Passes finished, failed ones included.
    pub passes: u64,
    /// Commits made in the output repository.
    pub commits: u64,
    /// Passes that ended in an error.
    pub failures: u64,
}

/// Renders, publishes and pushes every `every` until `shutdown` resolves. A pass under way when
/// `shutdown` resolves is finished first (a render commits at its end, so stopping in the
/// middle would only waste it). Errors of a pass are printed and counted, never returned: only
/// arguments that can never work (no `--output`, a malformed ClickHouse configuration) end it
/// with an error.
pub async fn watch(
    args: RenderArgs,
    every: Duration,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<WatchReport> {
    let mut renderer = Renderer::new(&args)?;
    let mut report = WatchReport::default();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut stopping = false;
    eprintln!(
        "render: watching {} every {} s",
        args.platform.display(),
        every.as_secs_f64()
    );
    loop {
        let result = {
            let mut pass = std::pin::pin!(renderer.pass(true));
            tokio::select! {
                result = &mut pass => result,
                () = &mut shutdown => {
                    stopping = true;
                    eprintln!("render: stopping after the pass under way");
                    pass.await
                }
            }
        };
        report.passes += 1;
        match result {
            Ok(pass) => report.commits += u64::from(pass.committed),
            Err(err) => {
                report.failures += 1;
                eprintln!(
                    "error: {err:#}\nrender: the output keeps its last good state; trying again in {} s",
                    every.as_secs_f64()
                );
            }
        }
        if stopping {
            break;
        }
        tokio::select! {
            () = &mut shutdown => break,
            () = tokio::time::sleep(every) => {}
        }
    }
    Ok(report)
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default)]
struct Pass {
    committed: bool,
}

/// The state kept from one pass to the next.
struct Renderer {
    platform: PathBuf,
    output: PathBuf,
    push: bool,
    store: Option<fleetscope_store::Store>,
    /// Whether the schema was applied (by this process) yet.
    migrated: bool,
    /// The platform digest last rendered and the head the output had after it: when both are
    /// unchanged the platform repo is not rendered again, even if the render made no commit
    /// (then the head's recorded digest is an older one, and [`crate::render_if_changed`]
    /// alone would render again on every pass).
    rendered: Option<(String, Option<String>)>,
    /// The head last pushed.
    pushed: Option<String>,
}

impl Renderer {
    fn new(args: &RenderArgs) -> anyhow::Result<Renderer> {
        let output = args
            .output
            .clone()
            .context("--output is required (or --dry-run)")?;
        let store = connect_store(args)?;
        Ok(Renderer {
            platform: args.platform.clone(),
            output,
            push: args.push,
            store,
            migrated: false,
            rendered: None,
            pushed: None,
        })
    }

    /// One pass: render if the platform repo changed, publish what ClickHouse does not have
    /// yet, push. `watching` makes a pass that changes nothing silent, resolves the platform
    /// path once per pass (a checkout replaced by swapping a symbolic link is read at one
    /// revision throughout), and pushes only a head not pushed yet.
    async fn pass(&mut self, watching: bool) -> anyhow::Result<Pass> {
        if let (Some(store), false) = (&self.store, self.migrated) {
            store.migrate().await.context("applying the schema")?;
            self.migrated = true;
        }
        let platform = if watching {
            std::fs::canonicalize(&self.platform).with_context(|| {
                format!("the platform repo {} is not there", self.platform.display())
            })?
        } else {
            self.platform.clone()
        };
        let output = self.output.clone();

        // An unreadable platform repo is left to the render, which reports it.
        let digest = if watching {
            let platform = platform.clone();
            blocking(move || crate::platform_digest(&platform).ok()).await
        } else {
            None
        };
        let head = current_head(&output);
        let unchanged = self
            .rendered
            .as_ref()
            .is_some_and(|(d, h)| Some(d) == digest.as_ref() && *h == head);
        let rendered = if unchanged {
            None
        } else {
            let (platform, output) = (platform.clone(), output.clone());
            blocking(move || crate::render_if_changed(&platform, &output)).await?
        };
        let outcome = match rendered {
            Some(outcome) => Some(outcome),
            None => {
                // The output is up to date; the desired state may not be, if publishing it
                // failed last time. Then the render runs again (committing nothing) to
                // publish it.
                let published = match &self.store {
                    Some(store) => store
                        .last_render_commit()
                        .await
                        .context("reading the last published render")?,
                    None => None,
                };
                if self.store.is_none() || published == head {
                    if !watching {
                        println!("render: nothing changed (the platform repo is byte for byte what the last commit in {} was rendered from)", output.display());
                    }
                    None
                } else {
                    println!(
                        "render: the output is up to date, but its desired state was not published; publishing {}",
                        head.as_deref().unwrap_or("(no commit)")
                    );
                    let (platform, output) = (platform.clone(), output.clone());
                    Some(blocking(move || crate::render(&platform, &output)).await?)
                }
            }
        };
        let mut pass = Pass::default();
        if let Some(outcome) = &outcome {
            print_warnings(&outcome.warnings);
            println!("{}", outcome.summary);
            match &outcome.commit.commit {
                Some(commit) => {
                    pass.committed = true;
                    println!("commit {commit} in {}", output.display())
                }
                None => println!(
                    "no commit: the output already matches (head {})",
                    outcome.commit.head
                ),
            }
        }
        let head = current_head(&output);
        self.rendered = digest.map(|digest| (digest, head.clone()));
        if let (Some(store), Some(outcome)) = (&self.store, &outcome) {
            publish_and_say(store, outcome).await?;
        }
        if self.push && !(watching && self.pushed.is_some() && self.pushed == head) {
            let output = output.clone();
            blocking(move || {
                let repo = crate::git::open_or_init(&output)?;
                crate::git::push(&repo)
            })
            .await
            .context("pushing to origin")?;
            println!("pushed main to origin");
            self.pushed = head;
        }
        Ok(pass)
    }
}

/// The output's head commit, if the repository and a commit exist.
fn current_head(output: &Path) -> Option<String> {
    git2::Repository::open(output)
        .ok()
        .and_then(|repo| crate::git::head_commit(&repo))
}

/// Runs rendering and Git work off the async threads, so that a long render does not hold up
/// the signal handling and timers of the runtime.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(err) => std::panic::resume_unwind(err.into_panic()),
    }
}
