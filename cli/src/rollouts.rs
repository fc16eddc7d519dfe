//! `fleetscope rollouts`, `rollout` and `delivery`: the hub's rollout records, one rollout's
//! curve as a text chart with its stragglers, and the delivery figures per app.

use std::io::Write;

use clap::Args;
use serde::Deserialize;

use crate::client::{HubClient, HubConnection, Output};
use crate::selection::Selection;
use crate::table::{duration, Table};
use crate::{parse, write_line, CliError, Outcome};

/// `fleetscope rollouts [APP]`.
#[derive(Debug, Clone, Args)]
pub struct RolloutsArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    /// Only this app's rollouts.
    #[arg(env = "FLEETSCOPE_APP")]
    pub app: Option<String>,
    /// Only rollouts with this status (`in_progress`, `complete`, `stalled`, `superseded`,
    /// `rolled_back`).
    #[arg(long, env = "FLEETSCOPE_STATUS")]
    pub status: Option<String>,
    /// Only rollouts started at or after this moment (RFC 3339 or seconds since 1970).
    #[arg(long, env = "FLEETSCOPE_SINCE")]
    pub since: Option<String>,
    /// Most rollouts listed (the newest first), 1 to 1000.
    #[arg(long, env = "FLEETSCOPE_LIMIT", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
}

/// `fleetscope rollout ID`.
#[derive(Debug, Clone, Args)]
pub struct RolloutArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    /// The rollout's id, `app@render@version`, as `fleetscope rollouts` lists it.
    pub id: String,
    /// Stragglers listed at most, 1 to 1000.
    #[arg(long, env = "FLEETSCOPE_LIMIT", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub limit: u64,
}

/// `fleetscope delivery`.
#[derive(Debug, Clone, Args)]
pub struct DeliveryArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    /// Only this app.
    #[arg(long, env = "FLEETSCOPE_APP")]
    pub app: Option<String>,
    /// How far back from now: whole days (`30d`) or hours (`12h`), from 1h to 90d.
    #[arg(long, env = "FLEETSCOPE_WINDOW", default_value = "30d")]
    pub window: String,
}

/// The fields of a rollout this client prints.
#[derive(Debug, Deserialize)]
pub struct Rollout {
    pub id: String,
    pub app: String,
    pub version: String,
    pub started_at: Option<String>,
    pub platform_commit: Option<String>,
    pub status: String,
    pub targeted: u64,
    pub in_sync: u64,
    pub failed: u64,
    pub stale: u64,
    pub reached: u64,
    pub seconds_to_50_percent: Option<u64>,
    pub seconds_to_90_percent: Option<u64>,
    pub seconds_to_99_percent: Option<u64>,
    pub seconds_to_100_percent: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct RolloutsPage {
    pub items: Vec<Rollout>,
}

#[derive(Debug, Deserialize)]
pub struct CurvePoint {
    pub seconds: u64,
    pub in_sync: u64,
    pub failed: u64,
    pub waiting: u64,
}

#[derive(Debug, Deserialize)]
pub struct Straggler {
    pub cluster: String,
    pub group: Option<String>,
    pub state: String,
    pub since: Option<String>,
    pub observed_version: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct RolloutAnswer {
    pub rollout: Rollout,
    pub step_seconds: u64,
    pub curve: Vec<CurvePoint>,
    pub stragglers: Vec<Straggler>,
    pub next_cursor: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Spread {
    pub count: u64,
    pub median_seconds: Option<u64>,
    pub p90_seconds: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub struct AppDelivery {
    pub app: String,
    pub deployments: u64,
    pub deployments_per_day: f64,
    pub lead_time: Spread,
    pub changes: u64,
    pub failed_changes: u64,
    pub change_failure_rate: Option<f64>,
    pub time_to_restore: Spread,
}

#[derive(Debug, Deserialize)]
pub struct Delivery {
    pub from: Option<String>,
    pub to: Option<String>,
    pub apps: Vec<AppDelivery>,
}

fn seconds(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), duration)
}

pub(crate) async fn rollouts(
    args: &RolloutsArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query = args.selection.query();
    for (name, value) in [
        ("app", &args.app),
        ("status", &args.status),
        ("since", &args.since),
    ] {
        if let Some(value) = value {
            query.push((name, value.clone()));
        }
    }
    query.push(("limit", args.limit.to_string()));
    let text = client.get(&["rollouts"], &query).await?;
    if args.hub.output == Output::Json {
        write_line(out, &text)?;
        return Ok(Outcome::Ok);
    }
    let page: RolloutsPage = parse("/api/v1/rollouts", &text)?;
    write!(out, "{}", rollouts_table(&page.items))?;
    Ok(Outcome::Ok)
}

/// The rollouts' table, newest first as the hub lists them.
pub fn rollouts_table(items: &[Rollout]) -> Table {
    let mut table = Table::new([
        "APP", "VERSION", "STARTED", "STATUS", "TARGETED", "IN_SYNC", "FAILED", "TO_50%", "TO_90%",
        "TO_100%", "ID",
    ]);
    for r in items {
        table.push([
            r.app.clone(),
            r.version.clone(),
            r.started_at.clone().unwrap_or_else(|| "-".to_owned()),
            r.status.clone(),
            r.targeted.to_string(),
            r.in_sync.to_string(),
            r.failed.to_string(),
            seconds(r.seconds_to_50_percent),
            seconds(r.seconds_to_90_percent),
            seconds(r.seconds_to_100_percent),
            r.id.clone(),
        ]);
    }
    table
}

pub(crate) async fn rollout(args: &RolloutArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query = args.selection.query();
    query.push(("depth", "0".to_owned()));
    query.push(("limit", args.limit.to_string()));
    let text = client.get(&["rollouts", &args.id], &query).await?;
    if args.hub.output == Output::Json {
        write_line(out, &text)?;
        return Ok(Outcome::Ok);
    }
    let answer: RolloutAnswer = parse(&format!("/api/v1/rollouts/{}", args.id), &text)?;
    write!(out, "{}", rollout_text(&answer))?;
    Ok(Outcome::Ok)
}

/// Rows of the curve chart.
const CHART_ROWS: u64 = 8;
/// Most columns of the curve chart: points are taken evenly from the curve.
const CHART_COLUMNS: usize = 60;

/// One rollout: what it is, its milestones, its curve as a chart (`#` in sync, `x` failed,
/// `.` waiting, by share of the clusters it targets), and its stragglers.
pub fn rollout_text(answer: &RolloutAnswer) -> String {
    let r = &answer.rollout;
    let mut text = format!(
        "{} {} ({}), started {}{}\n{} of {} clusters in sync, {} failed, {} stale, {} reached it\nto 50 %: {}  to 90 %: {}  to 99 %: {}  to 100 %: {}\n",
        r.app,
        r.version,
        r.status,
        r.started_at.as_deref().unwrap_or("-"),
        r.platform_commit
            .as_deref()
            .map(|c| format!(" from platform commit {c}"))
            .unwrap_or_default(),
        r.in_sync,
        r.targeted,
        r.failed,
        r.stale,
        r.reached,
        seconds(r.seconds_to_50_percent),
        seconds(r.seconds_to_90_percent),
        seconds(r.seconds_to_99_percent),
        seconds(r.seconds_to_100_percent),
    );
    text.push_str(&chart(&answer.curve, answer.step_seconds));
    if answer.stragglers.is_empty() {
        text.push_str("\nno stragglers\n");
    } else {
        let mut table = Table::new(["CLUSTER", "GROUP", "STATE", "SINCE", "RUNNING"]);
        for s in &answer.stragglers {
            table.push([
                s.cluster.clone(),
                s.group.clone().unwrap_or_default(),
                s.state.clone(),
                s.since.clone().unwrap_or_else(|| "-".to_owned()),
                s.observed_version.clone().unwrap_or_else(|| "-".to_owned()),
            ]);
        }
        text.push_str(&format!("\nstragglers:\n{table}"));
        if answer.next_cursor.is_some() {
            text.push_str("(more: raise --limit)\n");
        }
    }
    text
}

/// The curve as rows of characters, the top row 100 % of the clusters targeted.
fn chart(curve: &[CurvePoint], step: u64) -> String {
    let Some(last) = curve.last() else {
        return String::new();
    };
    let total = (last.in_sync + last.failed + last.waiting).max(1);
    let every = curve.len().div_ceil(CHART_COLUMNS).max(1);
    let mut columns: Vec<&CurvePoint> = curve.iter().step_by(every).collect();
    if !std::ptr::eq(*columns.last().expect("a point"), last) {
        columns.push(last);
    }
    let mut text = String::new();
    for row in (0..CHART_ROWS).rev() {
        let line: String = columns
            .iter()
            .map(|p| {
                // The row's lower edge, in clusters: a cell is filled when the stack reaches it.
                let edge = row * total / CHART_ROWS;
                if p.in_sync > edge {
                    '#'
                } else if p.in_sync + p.failed > edge {
                    'x'
                } else {
                    '.'
                }
            })
            .collect();
        let label = if row == CHART_ROWS - 1 {
            "100%"
        } else if row == 0 {
            "  0%"
        } else {
            "    "
        };
        text.push_str(&format!("{label} |{line}\n"));
    }
    text.push_str(&format!(
        "      0 … {} (a column every {})\n",
        duration(last.seconds),
        duration(step * every as u64)
    ));
    text
}

pub(crate) async fn delivery(
    args: &DeliveryArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query = args.selection.query();
    if let Some(app) = &args.app {
        query.push(("app", app.clone()));
    }
    query.push(("window", args.window.clone()));
    let text = client.get(&["delivery"], &query).await?;
    if args.hub.output == Output::Json {
        write_line(out, &text)?;
        return Ok(Outcome::Ok);
    }
    let answer: Delivery = parse("/api/v1/delivery", &text)?;
    write_line(
        out,
        &format!(
            "from {} to {}",
            answer.from.as_deref().unwrap_or("-"),
            answer.to.as_deref().unwrap_or("-")
        ),
    )?;
    write!(out, "{}", delivery_table(&answer))?;
    Ok(Outcome::Ok)
}

/// The delivery figures per app.
pub fn delivery_table(answer: &Delivery) -> Table {
    let mut table = Table::new([
        "APP",
        "DEPLOYS",
        "PER_DAY",
        "LEADS",
        "LEAD_MEDIAN",
        "LEAD_P90",
        "CHANGES",
        "FAILED",
        "FAILURE_RATE",
        "RESTORES",
        "RESTORE_MEDIAN",
        "RESTORE_P90",
    ]);
    for a in &answer.apps {
        table.push([
            a.app.clone(),
            a.deployments.to_string(),
            format!("{:.2}", a.deployments_per_day),
            a.lead_time.count.to_string(),
            seconds(a.lead_time.median_seconds),
            seconds(a.lead_time.p90_seconds),
            a.changes.to_string(),
            a.failed_changes.to_string(),
            a.change_failure_rate
                .map_or_else(|| "-".to_owned(), |r| format!("{:.1}%", r * 100.0)),
            a.time_to_restore.count.to_string(),
            seconds(a.time_to_restore.median_seconds),
            seconds(a.time_to_restore.p90_seconds),
        ]);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(seconds: u64, in_sync: u64, failed: u64, waiting: u64) -> CurvePoint {
        CurvePoint {
            seconds,
            in_sync,
            failed,
            waiting,
        }
    }

    #[test]
    fn the_chart_stacks_in_sync_under_failed_under_waiting() {
        let curve = [point(0, 0, 0, 8), point(60, 4, 2, 2), point(120, 8, 0, 0)];
        expect_test::expect![[r#"
            100% |..#
                 |..#
                 |.x#
                 |.x#
                 |.##
                 |.##
                 |.##
              0% |.##
                  0 … 2m (a column every 1m)
        "#]]
        .assert_eq(&chart(&curve, 60));
    }
}
