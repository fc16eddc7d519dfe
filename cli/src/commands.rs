//! The four commands: their flags, the requests they make, and their tables.

use std::collections::BTreeMap;
use std::io::Write;

use clap::Args;
use serde_json::Value;

use crate::answers::{DriftPage, Gate, Summary, Versions};
use crate::client::{HubClient, HubConnection, Output};
use crate::table::{percent, shorten, Table};
use crate::{parse, write_line, CliError, Outcome};

/// One command with its flags, as the binary's subcommands hand them over.
#[derive(Debug)]
pub enum Command {
    Status(StatusArgs),
    Versions(VersionsArgs),
    Drift(DriftArgs),
    Gate(GateArgs),
}

/// The selection flags of the hub's routes (each a query parameter of the same name).
#[derive(Debug, Clone, Args)]
pub struct Selection {
    /// Only clusters within this group subtree (`emea/de`).
    #[arg(long, env = "FLEETSCOPE_GROUP")]
    pub group: Option<String>,
    /// Only clusters of this environment.
    #[arg(long, env = "FLEETSCOPE_ENVIRONMENT")]
    pub environment: Option<String>,
    /// Only clusters with this label, `key=value`; repeatable, all must match.
    #[arg(long, env = "FLEETSCOPE_LABEL", value_delimiter = ',')]
    pub label: Vec<String>,
}

impl Selection {
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        if let Some(group) = &self.group {
            query.push(("group", group.clone()));
        }
        if let Some(environment) = &self.environment {
            query.push(("environment", environment.clone()));
        }
        for label in &self.label {
            query.push(("label", label.clone()));
        }
        query
    }
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
        let tables = gate_tables(&answer);
        for (i, table) in tables.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            write!(out, "{table}")?;
        }
    }
    Ok(outcome)
}

/// The gate's tables: the verdict with its numbers (and every other value the hub answered,
/// one column each), the targeted clusters per state, and `holding_back` when present.
pub fn gate_tables(answer: &Gate) -> Vec<Table> {
    let mut headers: Vec<String> = [
        "VERDICT",
        "SHARE_IN_SYNC",
        "THRESHOLD",
        "TARGETED",
        "IN_SYNC",
    ]
    .map(String::from)
    .to_vec();
    let mut row = vec![
        answer.verdict.clone(),
        percent(answer.share_in_sync),
        percent(answer.threshold),
        answer.targeted_clusters.to_string(),
        answer.in_sync.to_string(),
    ];
    for (key, value) in &answer.more {
        if key != "holding_back" {
            headers.push(key.to_uppercase());
            // Shares (`share_soaked`, …) read as the two the client names do.
            match value.as_f64() {
                Some(share) if key.starts_with("share_") => row.push(percent(share)),
                _ => row.push(cell(value)),
            }
        }
    }
    headers.push("REASON".to_owned());
    row.push(answer.reason.clone());
    let mut verdict = Table::new(headers);
    verdict.push(row);

    let mut by_state = Table::new(["STATE", "CLUSTERS"]);
    for (state, clusters) in &answer.by_state {
        by_state.push([state.clone(), clusters.to_string()]);
    }
    let mut tables = vec![verdict, by_state];
    if let Some(Value::Array(items)) = answer.more.get("holding_back") {
        tables.push(objects_table(items));
    }
    tables
}

/// A list of JSON objects as a table: one column per key any of them has.
fn objects_table(items: &[Value]) -> Table {
    let mut keys: Vec<&str> = Vec::new();
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
    use super::*;

    /// A gate answer with parameters newer than this client: their values become columns, and
    /// `holding_back` a table of its own.
    #[test]
    fn a_gate_with_newer_fields_prints_them_and_what_holds_back() {
        let answer: Gate = serde_json::from_value(serde_json::json!({
            "app": "checkout", "version": "1.5.0", "commit": null, "group": "emea",
            "targeted_clusters": 120, "in_sync": 99,
            "by_state": { "failed": 3, "in_sync": 99, "progressing": 18 },
            "share_in_sync": 0.825, "threshold": 0.95, "verdict": "fail",
            "reason": "the share in sync is below the threshold",
            "soak_seconds": 600, "max_failed": 2,
            "holding_back": [
                { "cluster": "berlin-01", "state": "failed", "since": "2026-11-22T09:41:07Z" },
                { "cluster": "paris-02", "state": "progressing", "since": null },
            ],
        }))
        .unwrap();
        let printed: Vec<String> = gate_tables(&answer).iter().map(Table::to_string).collect();
        assert_eq!(
            printed.join("\n"),
            "\
VERDICT   SHARE_IN_SYNC   THRESHOLD   TARGETED   IN_SYNC   MAX_FAILED   SOAK_SECONDS   REASON
fail      82.5%           95.0%       120        99        2            600            the share in sync is below the threshold

STATE         CLUSTERS
failed        3
in_sync       99
progressing   18

CLUSTER     SINCE                  STATE
berlin-01   2026-11-22T09:41:07Z   failed
paris-02    <none>                 progressing
"
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
