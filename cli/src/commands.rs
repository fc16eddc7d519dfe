//! The commands about the fleet's state (`status`, `versions`, `drift`, `gate`): their flags,
//! the requests they make, and their tables; the rollout commands are in `rollouts`.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use serde_json::Value;

use crate::answers::{DriftPage, Gate, Summary, Versions};
use crate::client::{HubClient, HubConnection, Output};
pub use crate::selection::Selection;
use crate::table::{duration, percent, shorten, thousands, Table};
use crate::{parse, write_line, CliError, Outcome};

/// One command with its flags, as the binary's subcommands hand them over.
#[derive(Debug)]
pub enum Command {
    Status(StatusArgs),
    Versions(VersionsArgs),
    Drift(DriftArgs),
    Gate(GateArgs),
    Rollouts(crate::rollouts::RolloutsArgs),
    Rollout(crate::rollouts::RolloutArgs),
    Delivery(crate::rollouts::DeliveryArgs),
    Login(crate::login::LoginArgs),
}

/// `--at`: the hub's answer as of a past moment.
#[derive(Debug, Clone, Args)]
pub struct AtFlag {
    /// The fleet as it was at this past moment (RFC 3339, `2026-11-20T14:00:00Z`, or seconds
    /// since 1970), within the history the hub keeps; without it, now.
    #[arg(long, env = "FLEETSCOPE_AT")]
    pub at: Option<String>,
}

impl AtFlag {
    fn push(&self, query: &mut Vec<(&'static str, String)>) {
        if let Some(at) = &self.at {
            query.push(("at", at.clone()));
        }
    }
}

/// `fleetscope status`.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub at: AtFlag,
    /// Only this app's instances.
    #[arg(long, env = "FLEETSCOPE_APP")]
    pub app: Option<String>,
    /// Deepest group level listed below the total (0: the total alone).
    #[arg(long, env = "FLEETSCOPE_DEPTH", default_value_t = 1)]
    pub depth: u8,
}

/// `fleetscope versions APP`.
#[derive(Debug, Clone, Args)]
pub struct VersionsArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub at: AtFlag,
    /// The app.
    #[arg(env = "FLEETSCOPE_APP")]
    pub app: String,
    /// Group level of the per-group counts.
    #[arg(long, env = "FLEETSCOPE_DEPTH", default_value_t = 1)]
    pub depth: u8,
}

/// `fleetscope drift`.
#[derive(Debug, Clone, Args)]
pub struct DriftArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub at: AtFlag,
    /// Only this app.
    #[arg(long, env = "FLEETSCOPE_APP")]
    pub app: Option<String>,
    /// Drift states to list, comma-separated or repeated (default: every state but `in_sync`).
    #[arg(long, env = "FLEETSCOPE_STATE", value_delimiter = ',')]
    pub state: Vec<String>,
    /// Most pairs listed in all; pages are read until this many or the last page.
    #[arg(long, env = "FLEETSCOPE_LIMIT", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Characters of the reconciler's message shown in the table (the JSON has it whole).
    #[arg(long, env = "FLEETSCOPE_MESSAGE_WIDTH", default_value_t = 60)]
    pub message_width: usize,
}

/// `fleetscope gate`.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["version", "commit"])))]
pub struct GateArgs {
    #[command(flatten)]
    pub hub: HubConnection,
    #[command(flatten)]
    pub selection: Selection,
    /// The app rolled out.
    #[arg(long, env = "FLEETSCOPE_APP")]
    pub app: String,
    /// The version rolled out.
    #[arg(long, env = "FLEETSCOPE_VERSION")]
    pub version: Option<String>,
    /// The GitOps commit rolled out.
    #[arg(long, env = "FLEETSCOPE_COMMIT")]
    pub commit: Option<String>,
    /// Share of targeted clusters in sync needed to pass, from 0 to 1 (the hub's default: 1).
    #[arg(long, env = "FLEETSCOPE_THRESHOLD", value_parser = threshold)]
    pub threshold: Option<f64>,
    /// Any other parameter of the hub's gate, `key=value`, passed on as it is; repeatable (the
    /// environment variable holds one).
    #[arg(long = "param", env = "FLEETSCOPE_GATE_PARAM", value_parser = key_value)]
    pub params: Vec<(String, String)>,
}

fn threshold(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!("{text:?} is not a number from 0 to 1")),
    }
}

fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not key=value")),
    }
}

/// What a cell shows for a value the hub sent as null.
const NONE: &str = "<none>";

impl Command {
    /// Asks the hub and writes the answer to `out`.
    pub async fn run(&self, out: &mut dyn Write) -> Result<Outcome, CliError> {
        match self {
            Command::Status(args) => status(args, out).await,
            Command::Versions(args) => versions(args, out).await,
            Command::Drift(args) => drift(args, out).await,
            Command::Gate(args) => gate(args, out).await,
            Command::Rollouts(args) => crate::rollouts::rollouts(args, out).await,
            Command::Rollout(args) => crate::rollouts::rollout(args, out).await,
            Command::Delivery(args) => crate::rollouts::delivery(args, out).await,
            Command::Login(args) => crate::login::login(args, out).await,
        }
    }
}

async fn status(args: &StatusArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query = args.selection.query();
    args.at.push(&mut query);
    if let Some(app) = &args.app {
        query.push(("app", app.clone()));
    }
    query.push(("depth", args.depth.to_string()));
    let text = client.get(&["summary"], &query).await?;
    if args.hub.output == Output::Json {
        write_line(out, &text)?;
        return Ok(Outcome::Ok);
    }
    let summary: Summary = parse("/api/v1/summary", &text)?;
    write!(out, "{}", status_table(&summary))?;
    Ok(Outcome::Ok)
}

/// The summary's table: the selection's total, then every group listed.
pub fn status_table(summary: &Summary) -> Table {
    let mut table = Table::new([
        "GROUP",
        "CLUSTERS",
        "REPORTING",
        "STALE",
        "IN_SYNC",
        "PROGRESSING",
        "FAILED",
        "OUT_OF_SYNC",
        "MISSING",
        "UNEXPECTED",
        "STALE_APPS",
        "UNKNOWN",
        "IN_SYNC%",
    ]);
    for counts in std::iter::once(&summary.total).chain(&summary.groups) {
        let s = &counts.app_instances_by_state;
        let share = if counts.app_instances == 0 {
            "-".to_owned()
        } else {
            percent(s.in_sync as f64 / counts.app_instances as f64)
        };
        table.push([
            counts.group.clone().unwrap_or_else(|| "(total)".to_owned()),
            counts.clusters.to_string(),
            counts.reporting_clusters.to_string(),
            counts.stale_clusters.to_string(),
            s.in_sync.to_string(),
            s.progressing.to_string(),
            s.failed.to_string(),
            s.out_of_sync.to_string(),
            s.missing.to_string(),
            s.unexpected.to_string(),
            s.stale.to_string(),
            s.unknown.to_string(),
            share,
        ]);
    }
    table
}

async fn versions(args: &VersionsArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query = args.selection.query();
    args.at.push(&mut query);
    query.push(("depth", args.depth.to_string()));
    let text = client.get(&["apps", &args.app, "versions"], &query).await?;
    if args.hub.output == Output::Json {
        write_line(out, &text)?;
        return Ok(Outcome::Ok);
    }
    let answer: Versions = parse(&format!("/api/v1/apps/{}/versions", args.app), &text)?;
    let (by_version, by_group) = versions_tables(&answer);
    write!(out, "{by_version}")?;
    if !by_group.is_empty() {
        write!(out, "\n{by_group}")?;
    }
    Ok(Outcome::Ok)
}

/// The versions' tables: clusters per version desired and running, then the same per group.
pub fn versions_tables(answer: &Versions) -> (Table, Table) {
    let mut totals: BTreeMap<&str, [u64; 2]> = BTreeMap::new();
    let mut groups: BTreeMap<(&str, &str), [u64; 2]> = BTreeMap::new();
    for (list, side) in [(&answer.desired, 0), (&answer.running, 1)] {
        for count in list {
            totals.entry(&count.version).or_default()[side] += count.clusters;
            for (group, clusters) in &count.groups {
                groups.entry((group, &count.version)).or_default()[side] += clusters;
            }
        }
    }
    let mut by_version = Table::new(["VERSION", "DESIRED", "RUNNING"]);
    for (version, [desired, running]) in totals {
        by_version.push([version.to_owned(), desired.to_string(), running.to_string()]);
    }
    let mut by_group = Table::new(["GROUP", "VERSION", "DESIRED", "RUNNING"]);
    for ((group, version), [desired, running]) in groups {
        by_group.push([
            group.to_owned(),
            version.to_owned(),
            desired.to_string(),
            running.to_string(),
        ]);
    }
    (by_version, by_group)
}

/// The most pairs the hub lists on one page.
const PAGE_LIMIT: u64 = 1000;

async fn drift(args: &DriftArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query = args.selection.query();
    args.at.push(&mut query);
    if let Some(app) = &args.app {
        query.push(("app", app.clone()));
    }
    if !args.state.is_empty() {
        query.push(("state", args.state.join(",")));
    }
    let mut pages: Vec<String> = Vec::new();
    let mut listed = 0;
    let mut cursor: Option<String> = None;
    loop {
        let mut page_query = query.clone();
        let remaining = args.limit - listed;
        page_query.push(("limit", remaining.min(PAGE_LIMIT).to_string()));
        if let Some(cursor) = cursor.take() {
            page_query.push(("cursor", cursor));
        }
        let text = client.get(&["drift"], &page_query).await?;
        let page: DriftPage = parse("/api/v1/drift", &text)?;
        listed += page.items.len() as u64;
        pages.push(text);
        match page.next_cursor {
            Some(next) if listed < args.limit && !page.items.is_empty() => cursor = Some(next),
            _ => break,
        }
    }
    if args.hub.output == Output::Json {
        let joined = join_pages(&pages)?;
        write_line(out, &joined)?;
        return Ok(Outcome::Ok);
    }
    let mut table = Table::new([
        "CLUSTER", "APP", "STATE", "SINCE", "DESIRED", "OBSERVED", "MESSAGE",
    ]);
    for text in &pages {
        let page: DriftPage = parse("/api/v1/drift", text)?;
        for pair in page.items {
            table.push([
                pair.cluster,
                pair.app,
                pair.state,
                pair.since.unwrap_or_else(|| NONE.to_owned()),
                pair.desired_version.unwrap_or_else(|| NONE.to_owned()),
                pair.observed_version.unwrap_or_else(|| NONE.to_owned()),
                shorten(pair.message.as_deref().unwrap_or(""), args.message_width),
            ]);
        }
    }
    write!(out, "{table}")?;
    Ok(Outcome::Ok)
}

/// The pages read as one answer: one page as the hub sent it, several as the first with every
/// page's items and the last page's `next_cursor`.
fn join_pages(pages: &[String]) -> Result<String, CliError> {
    if let [one] = pages {
        return Ok(one.clone());
    }
    let answer = |e: serde_json::Error| CliError::Answer {
        path: "/api/v1/drift".to_owned(),
        reason: e.to_string(),
    };
    let mut joined: Option<Value> = None;
    for text in pages {
        let mut page: Value = serde_json::from_str(text).map_err(answer)?;
        match &mut joined {
            None => joined = Some(page),
            Some(joined) => {
                let items = page["items"].as_array_mut().map(std::mem::take);
                if let (Some(all), Some(items)) = (joined["items"].as_array_mut(), items) {
                    all.extend(items);
                }
                joined["next_cursor"] = page["next_cursor"].take();
            }
        }
    }
    serde_json::to_string(&joined.unwrap_or(Value::Null)).map_err(answer)
}

async fn gate(args: &GateArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let client = HubClient::new(&args.hub)?;
    let mut query: Vec<(&str, String)> = vec![("app", args.app.clone())];
    if let Some(version) = &args.version {
        query.push(("version", version.clone()));
    }
    if let Some(commit) = &args.commit {
        query.push(("commit", commit.clone()));
    }
    if let Some(threshold) = args.threshold {
        query.push(("threshold", threshold.to_string()));
    }
    query.extend(args.selection.query());
    for (key, value) in &args.params {
        query.push((key, value.clone()));
    }
    let text = client.get(&["gate"], &query).await?;
    let answer: Gate = parse("/api/v1/gate", &text)?;
    let outcome = if answer.verdict == "pass" {
        Outcome::Ok
    } else {
        Outcome::GateFailed
    };
    if args.hub.output == Output::Json {
        write_line(out, &text)?;
    } else {
        write!(out, "{}", gate_text(&answer))?;
    }
    Ok(outcome)
}

/// The gate's answer for a person: labelled lines (the verdict and why, what was gated, the
/// share in sync against the threshold, the soak, failed clusters against what `max_failed`
/// allows, stale clusters and how they were handled, the targeted clusters per state, then one
/// line for every value a newer hub answers that this client does not name), then the page of
/// clusters holding the gate back as a table, and how to ask for the next page.
pub fn gate_text(answer: &Gate) -> String {
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut line = |label: &str, text: String| lines.push((format!("{label}:"), text));
    line("verdict", format!("{}: {}", answer.verdict, answer.reason));
    let mut rollout = answer.app.clone();
    match (&answer.version, &answer.commit) {
        (Some(version), _) => rollout.push_str(&format!(" {version}")),
        (None, Some(commit)) => rollout.push_str(&format!(" at commit {commit}")),
        (None, None) => {}
    }
    if let Some(group) = &answer.group {
        rollout.push_str(&format!(" in {group}"));
    }
    line("rollout", rollout);
    let targeted = thousands(answer.targeted_clusters);
    let soak = answer.soak_seconds.unwrap_or(0);
    let threshold = format!("threshold {}", percent(answer.threshold));
    let in_sync = format!(
        "{} of {targeted} targeted ({} clusters)",
        percent(answer.share_in_sync),
        thousands(answer.in_sync)
    );
    if soak == 0 {
        line("in sync", format!("{in_sync}; {threshold}"));
        if answer.soak_seconds.is_some() {
            line("soak", "none asked: in sync now counts".to_owned());
        }
    } else {
        line("in sync", in_sync);
        line(
            "soaked",
            format!(
                "{} in sync for at least {} ({} clusters); {threshold}",
                percent(answer.share_soaked.unwrap_or(0.0)),
                duration(soak),
                thousands(answer.soaked.unwrap_or(0))
            ),
        );
    }
    if let Some(failed) = answer.failed {
        let budget = match (&answer.max_failed, answer.failed_allowed) {
            (Some(asked), Some(allowed)) => {
                format!(
                    "at most {} allowed (max_failed {asked})",
                    thousands(allowed)
                )
            }
            _ => "no limit asked (max_failed)".to_owned(),
        };
        line(
            "failed",
            format!("{} of {targeted}; {budget}", thousands(failed)),
        );
    }
    if let Some(stale_clusters) = answer.stale_clusters {
        let handled = match answer.stale.as_deref() {
            Some("count") => "counted as not in sync".to_owned(),
            Some("exclude") => "left out of the targeted clusters".to_owned(),
            Some("fail") => "the gate fails while any is stale".to_owned(),
            Some(other) => format!("stale={other}"),
            None => "stale handling not given".to_owned(),
        };
        line(
            "stale",
            format!("{} selected clusters; {handled}", thousands(stale_clusters)),
        );
    }
    let by_state: Vec<String> = answer
        .by_state
        .iter()
        .map(|(state, clusters)| format!("{state} {}", thousands(*clusters)))
        .collect();
    line(
        "by state",
        if by_state.is_empty() {
            "no targeted clusters".to_owned()
        } else {
            by_state.join(", ")
        },
    );
    for (key, value) in &answer.more {
        // Shares (`share_…`) read as the ones this client names do.
        match value.as_f64() {
            Some(share) if key.starts_with("share_") => line(key, percent(share)),
            _ => line(key, cell(value)),
        }
    }
    let width = lines
        .iter()
        .map(|(label, _)| label.len())
        .max()
        .unwrap_or(0);
    let mut text = String::new();
    for (label, value) in &lines {
        text.push_str(&format!("{label:width$}   {value}\n"));
    }
    if !answer.holding_back.is_empty() {
        text.push_str(&format!(
            "\nholding it back ({} on this page, by cluster id):\n{}",
            thousands(answer.holding_back.len() as u64),
            objects_table(
                &answer.holding_back,
                &["cluster", "group", "state", "since", "soaks_at"]
            )
        ));
    }
    if let Some(cursor) = &answer.next_cursor {
        text.push_str(&format!(
            "more clusters hold it back: add --param cursor={cursor} for the next page\n"
        ));
    }
    text
}

/// A list of JSON objects as a table: one column per key any of them has, the keys of `first`
/// first in that order, then the others in the order they are met.
fn objects_table(items: &[Value], first: &[&str]) -> Table {
    let mut keys: Vec<&str> = Vec::new();
    for key in first {
        if items
            .iter()
            .any(|item| item.as_object().is_some_and(|o| o.contains_key(*key)))
        {
            keys.push(key);
        }
    }
    for item in items {
        if let Value::Object(object) = item {
            for key in object.keys() {
                if !keys.contains(&key.as_str()) {
                    keys.push(key);
                }
            }
        }
    }
    if keys.is_empty() {
        keys.push("value");
    }
    let mut table = Table::new(keys.iter().map(|k| k.to_uppercase()));
    for item in items {
        match item {
            Value::Object(object) => table.push(
                keys.iter()
                    .map(|k| object.get(*k).map_or(String::new(), cell)),
            ),
            other => table.push([cell(other)]),
        }
    }
    table
}

/// A JSON value in a cell: text as it is, null as `<none>`, anything else as JSON.
fn cell(value: &Value) -> String {
    match value {
        Value::String(text) => shorten(text, 60),
        Value::Null => NONE.to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;

    fn check_gate(answer: Value, expect: expect_test::Expect) {
        let answer: Gate = serde_json::from_value(answer).unwrap();
        expect.assert_eq(&gate_text(&answer));
    }

    /// A failing gate with a soak and a failure budget: labelled lines, the clusters holding it
    /// back as a table, and how to read the next page; values newer than this client get a line
    /// each.
    #[test]
    fn a_failing_gate_reads_as_lines_then_what_holds_it_back() {
        check_gate(
            serde_json::json!({
                "app": "checkout", "version": "1.5.0", "commit": null, "group": "emea",
                "targeted_clusters": 1234, "in_sync": 1074,
                "by_state": { "failed": 3, "in_sync": 1074, "progressing": 155, "stale": 2 },
                "share_in_sync": 0.87, "threshold": 0.9, "verdict": "fail",
                "reason": "the share in sync for the soak is below the threshold",
                "rule": "threshold", "soak_seconds": 7200, "soaked": 1000,
                "share_soaked": 0.8104, "failed": 3, "max_failed": "2%", "failed_allowed": 24,
                "stale": "count", "stale_clusters": 2,
                "holding_back": [
                    { "cluster": "berlin-01", "group": "emea/de", "state": "failed",
                      "since": "2026-11-22T09:41:07Z", "soaks_at": null },
                    { "cluster": "paris-02", "group": "emea/fr", "state": "in_sync",
                      "since": "2026-11-22T09:50:00Z", "soaks_at": "2026-11-22T11:50:00Z" },
                ],
                "next_cursor": "0a1b2c",
                "min_regions": 2, "share_canary": 0.5,
            }),
            expect![[r#"
                verdict:        fail: the share in sync for the soak is below the threshold
                rollout:        checkout 1.5.0 in emea
                in sync:        87.0% of 1,234 targeted (1,074 clusters)
                soaked:         81.0% in sync for at least 2h (1,000 clusters); threshold 90.0%
                failed:         3 of 1,234; at most 24 allowed (max_failed 2%)
                stale:          2 selected clusters; counted as not in sync
                by state:       failed 3, in_sync 1,074, progressing 155, stale 2
                min_regions:    2
                share_canary:   50.0%

                holding it back (2 on this page, by cluster id):
                CLUSTER     GROUP     STATE     SINCE                  SOAKS_AT
                berlin-01   emea/de   failed    2026-11-22T09:41:07Z   <none>
                paris-02    emea/fr   in_sync   2026-11-22T09:50:00Z   2026-11-22T11:50:00Z
                more clusters hold it back: add --param cursor=0a1b2c for the next page
            "#]],
        );
    }

    /// A passing gate with no soak and no failure budget asked, and nothing holding it back.
    #[test]
    fn a_passing_gate_says_what_was_not_asked() {
        check_gate(
            serde_json::json!({
                "app": "checkout", "version": null, "commit": "4f2a9c1", "group": null,
                "targeted_clusters": 300, "in_sync": 300, "by_state": { "in_sync": 300 },
                "share_in_sync": 1.0, "threshold": 1.0, "verdict": "pass",
                "reason": "the share in sync reaches the threshold", "rule": "threshold",
                "soak_seconds": 0, "soaked": 300, "share_soaked": 1.0, "failed": 0,
                "max_failed": null, "failed_allowed": null, "stale": "exclude",
                "stale_clusters": 0, "holding_back": [], "next_cursor": null,
            }),
            expect![[r#"
                verdict:    pass: the share in sync reaches the threshold
                rollout:    checkout at commit 4f2a9c1
                in sync:    100.0% of 300 targeted (300 clusters); threshold 100.0%
                soak:       none asked: in sync now counts
                failed:     0 of 300; no limit asked (max_failed)
                stale:      0 selected clusters; left out of the targeted clusters
                by state:   in_sync 300
            "#]],
        );
    }

    /// An older hub's answer, without the soak, failure and stale fields: only what it has.
    #[test]
    fn an_older_hubs_gate_prints_what_it_answered() {
        check_gate(
            serde_json::json!({
                "app": "checkout", "version": "1.5.0", "commit": null, "group": null,
                "targeted_clusters": 0, "in_sync": 0, "by_state": {},
                "share_in_sync": 0.0, "threshold": 0.9, "verdict": "fail",
                "reason": "no cluster in this selection desires that version or commit",
            }),
            expect![[r#"
                verdict:    fail: no cluster in this selection desires that version or commit
                rollout:    checkout 1.5.0
                in sync:    0.0% of 0 targeted (0 clusters); threshold 90.0%
                by state:   no targeted clusters
            "#]],
        );
    }

    #[test]
    fn versions_merge_desired_and_running_per_version_and_group() {
        let answer: Versions = serde_json::from_value(serde_json::json!({
            "app": "checkout",
            "desired": [{ "version": "1.5.0", "clusters": 3, "groups": { "amer": 1, "emea": 2 } }],
            "running": [
                { "version": "1.4.2", "clusters": 1, "groups": { "emea": 1 } },
                { "version": "1.5.0", "clusters": 2, "groups": { "amer": 1, "emea": 1 } },
            ],
            "clusters": [], "next_cursor": null,
        }))
        .unwrap();
        let (by_version, by_group) = versions_tables(&answer);
        assert_eq!(
            by_version.to_string(),
            "VERSION   DESIRED   RUNNING\n1.4.2     0         1\n1.5.0     3         2\n"
        );
        assert_eq!(
            by_group.to_string(),
            "GROUP   VERSION   DESIRED   RUNNING\namer    1.5.0     1         1\nemea    1.4.2     0         1\nemea    1.5.0     2         1\n"
        );
    }
}
