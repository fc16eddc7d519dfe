//! The ingest protocol between agents and the central collector: what a report is, how it is
//! encoded (JSON, gzip-compressed), and how the collector validates one before trusting any of it.
//!
//! A report carries a per-agent report sequence number (`seq`), strictly increasing, which makes
//! delivery idempotent: the collector acknowledges a report it has already stored without storing
//! it again. Each change inside carries a per-cluster change number (`change_seq`), which orders
//! changes in the store and makes the same change delivered twice collapse into one row.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};

use fleetscope_model::matching::ObjectFacts;
use fleetscope_model::state::ObjectKind;
use fleetscope_model::{
    AppName, ClusterId, Health, ObjectRef, ObservedItem, SyncStatus, Timestamp, Version,
};
use fleetscope_store::ObservedRow;

use crate::normalize::{MAX_IMAGES, MAX_LABELS};
use serde::{Deserialize, Serialize};

/// Largest compressed body the collector reads.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Largest body after decompression (a guard against compression bombs).
pub const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;
/// Most changes in one report.
pub const MAX_CHANGES: usize = 100_000;
/// Reporter timestamps more than this far in the future are refused.
pub const MAX_FUTURE_SKEW_SECONDS: i64 = 86_400;

/// The largest report or change number: 2^53 - 1, the largest integer every JSON
/// implementation reads exactly.
pub const MAX_SEQ: u64 = (1 << 53) - 1;
/// How far a report or change number may be ahead of the collector's clock in microseconds
/// (one day). Agents start their counters at the clock in microseconds and count up by one, so
/// a legitimate number is never that far ahead.
pub const MAX_SEQ_AHEAD_MICROS: u64 = 86_400_000_000;

/// The largest report or change number the collector accepts at `now`: the clock in
/// microseconds plus a day, and never above [`MAX_SEQ`].
pub fn seq_limit(now: Timestamp) -> u64 {
    let micros = u64::try_from(now.seconds())
        .unwrap_or(0)
        .saturating_mul(1_000_000);
    micros.saturating_add(MAX_SEQ_AHEAD_MICROS).min(MAX_SEQ)
}

/// What a report is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportKind {
    /// Changes since the previous report.
    Delta,
    /// The full current state of every object; objects missing from it were deleted.
    Snapshot,
    /// Only a sign of life; `changes` is empty.
    Heartbeat,
}

impl ReportKind {
    /// The name used on the wire and in metrics' labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ReportKind::Delta => "delta",
            ReportKind::Snapshot => "snapshot",
            ReportKind::Heartbeat => "heartbeat",
        }
    }
}

/// One report from one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub cluster: String,
    pub agent_version: String,
    /// The report number: per agent, strictly increasing across restarts (the agent persists
    /// it); `seq` on the wire.
    #[serde(rename = "seq")]
    pub report_seq: u64,
    /// The agent's clock when the report was made, seconds since the epoch.
    pub sent_at: i64,
    pub kind: ReportKind,
    /// Reconciler name to version, for example `flux` → `v2.4.0`.
    #[serde(default)]
    pub reconcilers: BTreeMap<String, String>,
    /// For snapshots: a change number above every change the agent has made, used for the
    /// deletions the collector infers.
    #[serde(default)]
    pub change_seq_high: u64,
    #[serde(default)]
    pub changes: Vec<Change>,
    /// The apps whose stamped objects the cluster holds, sent with reports that carry objects
    /// without stamps: an object the match rules give to one of these apps stays unmanaged,
    /// because a stamped object of an app wins over a matched one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stamped_apps: Vec<String>,
}

/// One object's state after a change (or its deletion).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub change_seq: u64,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    #[serde(default)]
    pub applied_revision: String,
    pub health: String,
    pub sync: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transitioned_at: Option<i64>,
    pub observed_at: i64,
    #[serde(default)]
    pub deleted: bool,
    /// For an app object without stamps: its labels, for the match rules.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// For an Argo CD Application without stamps: `spec.source.targetRevision`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_revision: String,
    /// For an Argo CD Application without stamps: `status.summary.images`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<String>,
}

impl Change {
    /// The wire form of an observed item (the agent's side).
    pub fn from_observed(item: &ObservedItem) -> Change {
        Change {
            change_seq: item.change_seq,
            kind: item.object.kind.as_str().to_owned(),
            namespace: item.object.namespace.clone(),
            name: item.object.name.clone(),
            app: item.app.as_ref().map(ToString::to_string),
            version: item.version.as_ref().map(ToString::to_string),
            content_hash: item.content_hash.clone(),
            applied_revision: item.applied_revision.clone(),
            health: item.health.as_str().to_owned(),
            sync: item.sync.as_str().to_owned(),
            reason: item.reason.clone(),
            message: item.message.clone(),
            transitioned_at: (item.transitioned_at != Timestamp::EPOCH)
                .then_some(item.transitioned_at.seconds()),
            observed_at: item.observed_at.seconds(),
            deleted: item.deleted,
            labels: item
                .facts
                .as_ref()
                .map(|f| f.labels.clone())
                .unwrap_or_default(),
            target_revision: item
                .facts
                .as_ref()
                .map(|f| f.target_revision.clone())
                .unwrap_or_default(),
            images: item
                .facts
                .as_ref()
                .map(|f| f.images.clone())
                .unwrap_or_default(),
        }
    }
}

/// Why a report was refused. `field` names where, in JSON-path style.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{field}: {message}")]
pub struct ReportError {
    pub field: String,
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> ReportError {
    ReportError {
        field: field.into(),
        message: message.into(),
    }
}

fn check_len(field: &str, value: &str, max: usize) -> Result<(), ReportError> {
    if value.len() > max {
        return Err(bad(
            field,
            format!("is {} bytes long, at most {max}", value.len()),
        ));
    }
    if value.chars().any(char::is_control) && field != "message" && !field.ends_with(".message") {
        return Err(bad(field, format!("{value:?} contains control characters")));
    }
    Ok(())
}

fn check_seq(field: &str, value: u64, limit: u64) -> Result<(), ReportError> {
    if value > MAX_SEQ {
        return Err(bad(
            field,
            format!("{value} is above the largest number allowed, {MAX_SEQ} (2^53 - 1)"),
        ));
    }
    if value > limit {
        return Err(bad(
            field,
            format!(
                "{value} is more than a day ahead of the collector's clock in microseconds (at most {limit})"
            ),
        ));
    }
    Ok(())
}

/// Two different states of one object under one change number would leave the store and the
/// hub to pick one of them; refused, naming the later of the two.
fn check_conflicting_numbers(changes: &[Change]) -> Result<(), ReportError> {
    if changes.len() < 2 {
        return Ok(());
    }
    let mut seen: HashMap<(u64, &str, &str, &str), usize> = HashMap::with_capacity(changes.len());
    for (index, change) in changes.iter().enumerate() {
        let key = (
            change.change_seq,
            change.kind.as_str(),
            change.namespace.as_str(),
            change.name.as_str(),
        );
        if let Some(&first) = seen.get(&key) {
            if changes[first] != *change {
                return Err(bad(
                    format!("changes[{index}].change_seq"),
                    format!(
                        "{} is also the change number of changes[{first}], a different state of the same object",
                        change.change_seq
                    ),
                ));
            }
        } else {
            seen.insert(key, index);
        }
    }
    Ok(())
}

/// A report that passed validation, in the model's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidReport {
    pub cluster: ClusterId,
    pub agent_version: String,
    pub report_seq: u64,
    pub kind: ReportKind,
    pub reconcilers: BTreeMap<String, String>,
    pub change_seq_high: u64,
    pub items: Vec<ObservedItem>,
    /// The apps with a stamped object on the cluster, as the agent said ([`Report::stamped_apps`]).
    pub stamped_apps: Vec<AppName>,
}

impl Report {
    /// Checks every field, returning the first problem with its place. `now` is the collector's
    /// clock, for refusing timestamps from the far future.
    pub fn validate(self, now: Timestamp) -> Result<ValidReport, ReportError> {
        let cluster =
            ClusterId::parse(&self.cluster).map_err(|err| bad("cluster", err.to_string()))?;
        check_len("agent_version", &self.agent_version, 64)?;
        if self.report_seq == 0 && self.kind != ReportKind::Heartbeat {
            return Err(bad("seq", "must be at least 1"));
        }
        let limit = seq_limit(now);
        check_seq("seq", self.report_seq, limit)?;
        check_seq("change_seq_high", self.change_seq_high, limit)?;
        if self.reconcilers.len() > 16 {
            return Err(bad(
                "reconcilers",
                format!("has {} entries, at most 16", self.reconcilers.len()),
            ));
        }
        for (name, version) in &self.reconcilers {
            check_len(&format!("reconcilers.{name}"), name, 64)?;
            check_len(&format!("reconcilers.{name}"), version, 64)?;
        }
        if self.kind == ReportKind::Heartbeat && !self.changes.is_empty() {
            return Err(bad("changes", "a heartbeat carries no changes"));
        }
        if self.changes.len() > MAX_CHANGES {
            return Err(bad(
                "changes",
                format!("has {} entries, at most {MAX_CHANGES}", self.changes.len()),
            ));
        }
        check_conflicting_numbers(&self.changes)?;
        let latest_allowed = now.seconds() + MAX_FUTURE_SKEW_SECONDS;
        let mut items = Vec::with_capacity(self.changes.len());
        for (index, change) in self.changes.into_iter().enumerate() {
            let at = |field: &str| format!("changes[{index}].{field}");
            let kind = ObjectKind::parse(&change.kind).ok_or_else(|| {
                bad(at("kind"), format!("{:?} is not one of Kustomization, HelmRelease, GitRepository, OCIRepository, Application", change.kind))
            })?;
            check_len(&at("namespace"), &change.namespace, 253)?;
            check_len(&at("name"), &change.name, 253)?;
            if change.name.is_empty() {
                return Err(bad(at("name"), "is empty"));
            }
            let app = change
                .app
                .as_deref()
                .map(AppName::parse)
                .transpose()
                .map_err(|err| bad(at("app"), err.to_string()))?;
            let version = change
                .version
                .as_deref()
                .map(Version::parse)
                .transpose()
                .map_err(|err| bad(at("version"), err.to_string()))?;
            if let Some(hash) = &change.content_hash {
                fleetscope_model::stamps::validate_content_hash(hash)
                    .map_err(|err| bad(at("content_hash"), err))?;
            }
            check_len(&at("applied_revision"), &change.applied_revision, 512)?;
            check_len(&at("reason"), &change.reason, 256)?;
            let health = Health::parse(&change.health).ok_or_else(|| {
                bad(
                    at("health"),
                    format!(
                        "{:?} is not a health (healthy, progressing, degraded, suspended, unknown)",
                        change.health
                    ),
                )
            })?;
            let sync = SyncStatus::parse(&change.sync).ok_or_else(|| {
                bad(
                    at("sync"),
                    format!(
                        "{:?} is not a sync status (synced, out_of_sync, unknown)",
                        change.sync
                    ),
                )
            })?;
            for (field, value) in [
                ("observed_at", Some(change.observed_at)),
                ("transitioned_at", change.transitioned_at),
            ] {
                if let Some(value) = value {
                    if !(0..=latest_allowed).contains(&value) {
                        return Err(bad(
                            at(field),
                            format!("{value} is not a time between 1970 and a day from now"),
                        ));
                    }
                }
            }
            if change.change_seq == 0 {
                return Err(bad(at("change_seq"), "must be at least 1"));
            }
            check_seq(&at("change_seq"), change.change_seq, limit)?;
            let message = fleetscope_model::state::truncate_on_char_boundary(
                &change.message,
                ObservedItem::MAX_MESSAGE_BYTES,
            )
            .to_owned();
            let facts = facts_of(
                &at,
                kind,
                app.is_some(),
                change.labels,
                change.target_revision,
                change.images,
            )?;
            items.push(ObservedItem {
                cluster: cluster.clone(),
                object: ObjectRef {
                    kind,
                    namespace: change.namespace,
                    name: change.name,
                },
                app,
                version,
                content_hash: change.content_hash,
                applied_revision: change.applied_revision,
                health,
                sync,
                reason: change.reason,
                message,
                transitioned_at: Timestamp(change.transitioned_at.unwrap_or(0)),
                observed_at: Timestamp(change.observed_at),
                change_seq: change.change_seq,
                deleted: change.deleted,
                facts,
            });
        }
        let stamped_apps = stamped_apps(&self.stamped_apps)?;
        Ok(ValidReport {
            cluster,
            agent_version: self.agent_version,
            report_seq: self.report_seq,
            kind: self.kind,
            reconcilers: self.reconcilers,
            change_seq_high: self.change_seq_high,
            items,
            stamped_apps,
        })
    }

    /// JSON, gzip-compressed: the request body an agent sends.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).expect("a report always serializes");
        let mut encoder = flate2::write::GzEncoder::new(
            Vec::with_capacity(json.len() / 4 + 64),
            flate2::Compression::default(),
        );
        encoder
            .write_all(&json)
            .expect("writing to memory cannot fail");
        encoder.finish().expect("writing to memory cannot fail")
    }
}

/// The most apps a report's `stamped_apps` names.
pub const MAX_STAMPED_APPS: usize = 10_000;

/// The report's `stamped_apps`, checked.
fn stamped_apps(names: &[String]) -> Result<Vec<AppName>, ReportError> {
    if names.len() > MAX_STAMPED_APPS {
        return Err(bad(
            "stamped_apps",
            format!("has {} entries, at most {MAX_STAMPED_APPS}", names.len()),
        ));
    }
    names
        .iter()
        .enumerate()
        .map(|(index, app)| {
            AppName::parse(app)
                .map_err(|err| bad(format!("stamped_apps[{index}]"), err.to_string()))
        })
        .collect()
}

/// The match facts of one change, checked: only an app object without stamps carries them.
fn facts_of(
    at: &dyn Fn(&str) -> String,
    kind: ObjectKind,
    stamped: bool,
    labels: BTreeMap<String, String>,
    target_revision: String,
    images: Vec<String>,
) -> Result<Option<Box<ObjectFacts>>, ReportError> {
    let facts = ObjectFacts {
        labels,
        target_revision,
        images,
    };
    if facts.is_empty() {
        return Ok(None);
    }
    if stamped || !kind.is_app_object() {
        return Err(bad(
            at("labels"),
            "labels, target_revision and images are sent only for a Kustomization, HelmRelease or Application without an app stamp",
        ));
    }
    if facts.labels.len() > MAX_LABELS {
        return Err(bad(
            at("labels"),
            format!("has {} entries, at most {MAX_LABELS}", facts.labels.len()),
        ));
    }
    for (key, value) in &facts.labels {
        check_len(&at(&format!("labels.{key}")), key, 317)?;
        check_len(&at(&format!("labels.{key}")), value, 63)?;
    }
    check_len(&at("target_revision"), &facts.target_revision, 256)?;
    if facts.images.len() > MAX_IMAGES {
        return Err(bad(
            at("images"),
            format!("has {} entries, at most {MAX_IMAGES}", facts.images.len()),
        ));
    }
    for (index, image) in facts.images.iter().enumerate() {
        check_len(&at(&format!("images[{index}]")), image, 512)?;
    }
    Ok(Some(Box::new(facts)))
}

/// The gzip header [`Report::encode`] writes: deflate, no flags, no time, no extra flags at the
/// default level, unknown operating system.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Encodes reports into the same request bodies as [`Report::encode`], keeping one compressor
/// (and its tables, hundreds of KB) from one report to the next instead of building a fresh
/// one per report. For a sender of many small reports: the load test's simulated agents send
/// thousands of heartbeats a second, where a real agent sends one every 30 s.
pub struct ReportEncoder {
    deflate: flate2::Compress,
    /// The JSON of the report being encoded, kept for its allocation.
    json: Vec<u8>,
}

impl std::fmt::Debug for ReportEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReportEncoder").finish_non_exhaustive()
    }
}

impl Default for ReportEncoder {
    fn default() -> Self {
        ReportEncoder::new()
    }
}

impl ReportEncoder {
    pub fn new() -> ReportEncoder {
        ReportEncoder {
            deflate: flate2::Compress::new(flate2::Compression::default(), false),
            json: Vec::new(),
        }
    }

    /// JSON, gzip-compressed: the body [`Report::encode`] gives for `report`.
    pub fn encode(&mut self, report: &Report) -> Vec<u8> {
        self.json.clear();
        serde_json::to_writer(&mut self.json, report).expect("a report always serializes");
        self.deflate.reset();
        let mut body = Vec::with_capacity(GZIP_HEADER.len() + self.json.len() / 4 + 64);
        body.extend_from_slice(&GZIP_HEADER);
        let mut consumed = 0;
        loop {
            if body.len() == body.capacity() {
                body.reserve(body.capacity());
            }
            let before = self.deflate.total_in();
            let status = self
                .deflate
                .compress_vec(
                    &self.json[consumed..],
                    &mut body,
                    flate2::FlushCompress::Finish,
                )
                .expect("compressing in memory cannot fail");
            consumed += (self.deflate.total_in() - before) as usize;
            if status == flate2::Status::StreamEnd {
                break;
            }
        }
        let mut crc = flate2::Crc::new();
        crc.update(&self.json);
        body.extend_from_slice(&crc.sum().to_le_bytes());
        body.extend_from_slice(&crc.amount().to_le_bytes());
        body
    }
}

/// Why a request body could not be read as a report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("body is {0} bytes, more than the {MAX_BODY_BYTES} allowed")]
    TooLarge(usize),
    #[error("body decompresses to more than {MAX_DECOMPRESSED_BYTES} bytes")]
    DecompressedTooLarge,
    #[error("body is not valid gzip: {0}")]
    BadGzip(String),
    #[error("body is not a valid report: {0}")]
    BadJson(String),
}

/// Reads a request body: gzip when `gzip` is true (Content-Encoding: gzip), else plain JSON.
pub fn decode(body: &[u8], gzip: bool) -> Result<Report, DecodeError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(DecodeError::TooLarge(body.len()));
    }
    let json = if gzip {
        let mut out = Vec::new();
        let mut reader = flate2::read::GzDecoder::new(body).take(MAX_DECOMPRESSED_BYTES as u64 + 1);
        reader
            .read_to_end(&mut out)
            .map_err(|err| DecodeError::BadGzip(err.to_string()))?;
        if out.len() > MAX_DECOMPRESSED_BYTES {
            return Err(DecodeError::DecompressedTooLarge);
        }
        out
    } else {
        body.to_vec()
    };
    serde_json::from_slice(&json).map_err(|err| DecodeError::BadJson(err.to_string()))
}

/// What an observation of one object says, in one form for the agent's observed items and the
/// collector's stored rows: every field but which cluster and object it is, when it was observed
/// or received, and its change number. Two observations of the same object say the same thing
/// when their states are equal.
///
/// Each form maps into this one without merging values it tells apart (an empty stored text is
/// an absent value, which a stored row cannot tell from an empty one either; a stored deletion
/// flag is kept as stored), so comparing states compares exactly what comparing the fields
/// themselves would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservedState<'a> {
    pub app: Option<&'a str>,
    pub version: Option<&'a str>,
    pub content_hash: Option<&'a str>,
    pub applied_revision: &'a str,
    pub health: &'a str,
    pub sync: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
    /// When the reconciler's status last changed, in seconds.
    pub transitioned_at: i64,
    /// 1 for a deletion, 0 otherwise (a stored row's flag as stored).
    pub deleted: u8,
}

impl<'a> ObservedState<'a> {
    /// The state an agent's observed item carries.
    pub fn of_item(item: &'a ObservedItem) -> ObservedState<'a> {
        ObservedState {
            app: item.app.as_ref().map(AppName::as_str),
            version: item.version.as_ref().map(Version::as_str),
            content_hash: item.content_hash.as_deref(),
            applied_revision: &item.applied_revision,
            health: item.health.as_str(),
            sync: item.sync.as_str(),
            reason: &item.reason,
            message: &item.message,
            transitioned_at: item.transitioned_at.seconds(),
            deleted: u8::from(item.deleted),
        }
    }

    /// The state a stored row carries.
    pub fn of_row(row: &'a ObservedRow) -> ObservedState<'a> {
        let stated = |text: &'a str| (!text.is_empty()).then_some(text);
        ObservedState {
            app: stated(&row.app),
            version: stated(&row.version),
            content_hash: stated(&row.content_hash),
            applied_revision: &row.applied_revision,
            health: &row.health,
            sync: &row.sync,
            reason: &row.reason,
            message: &row.message,
            transitioned_at: i64::from(row.transitioned_at),
            deleted: row.deleted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp(1_800_000_000);
    const NOW_MICROS: u64 = 1_800_000_000_000_000;

    fn change(seq: u64) -> Change {
        Change {
            change_seq: seq,
            kind: "HelmRelease".into(),
            namespace: "shop".into(),
            name: "api".into(),
            app: Some("api".into()),
            version: Some("1.2.0".into()),
            content_hash: Some(format!("sha256:{}", "0".repeat(64))),
            applied_revision: "1.2.0".into(),
            health: "healthy".into(),
            sync: "unknown".into(),
            reason: "UpgradeSucceeded".into(),
            message: "Helm upgrade succeeded".into(),
            transitioned_at: Some(NOW.seconds() - 60),
            observed_at: NOW.seconds() - 5,
            deleted: false,
            labels: Default::default(),
            target_revision: String::new(),
            images: Vec::new(),
        }
    }

    fn report(changes: Vec<Change>) -> Report {
        Report {
            cluster: "store-1".into(),
            agent_version: "0.1.0".into(),
            report_seq: 7,
            sent_at: NOW.seconds(),
            kind: ReportKind::Delta,
            reconcilers: [("flux".to_owned(), "v2.4.0".to_owned())].into(),
            change_seq_high: 0,
            changes,
            stamped_apps: Vec::new(),
        }
    }

    /// An item with every field of its state set.
    fn item() -> ObservedItem {
        report(vec![change(1)]).validate(NOW).unwrap().items[0].clone()
    }

    /// The item changed in each field of its state, one at a time.
    fn each_state_field_changed(item: &ObservedItem) -> Vec<ObservedItem> {
        vec![
            ObservedItem {
                app: None,
                ..item.clone()
            },
            ObservedItem {
                version: Some(Version::parse("1.3.0").unwrap()),
                ..item.clone()
            },
            ObservedItem {
                content_hash: None,
                ..item.clone()
            },
            ObservedItem {
                applied_revision: "1.3.0".into(),
                ..item.clone()
            },
            ObservedItem {
                health: Health::Degraded,
                ..item.clone()
            },
            ObservedItem {
                sync: SyncStatus::Synced,
                ..item.clone()
            },
            ObservedItem {
                reason: "UpgradeFailed".into(),
                ..item.clone()
            },
            ObservedItem {
                message: String::new(),
                ..item.clone()
            },
            ObservedItem {
                transitioned_at: NOW,
                ..item.clone()
            },
            ObservedItem {
                deleted: true,
                ..item.clone()
            },
        ]
    }

    #[test]
    fn observations_say_the_same_thing_when_every_state_field_agrees() {
        let item = item();
        let same = |a: &ObservedItem, b: &ObservedItem| {
            ObservedState::of_item(a) == ObservedState::of_item(b)
        };
        let later = ObservedItem {
            change_seq: 2,
            observed_at: Timestamp(NOW.seconds() - 1),
            ..item.clone()
        };
        assert!(
            same(&item, &later),
            "when observed and the change number aside"
        );
        for other in each_state_field_changed(&item) {
            assert!(!same(&item, &other), "{other:?}");
        }
    }

    #[test]
    fn a_stored_row_says_what_its_item_says() {
        let item = item();
        let row = |item: &ObservedItem| ObservedRow::new(item, NOW);
        let same =
            |a: &ObservedRow, b: &ObservedRow| ObservedState::of_row(a) == ObservedState::of_row(b);
        assert_eq!(
            ObservedState::of_row(&row(&item)),
            ObservedState::of_item(&item)
        );
        let received_again = ObservedRow {
            observed_at: 0,
            received_at: 0,
            change_seq: 9,
            ..row(&item)
        };
        assert!(
            same(&row(&item), &received_again),
            "when received and the change number aside"
        );
        for other in each_state_field_changed(&item) {
            assert!(!same(&row(&item), &row(&other)), "{other:?}");
        }
    }

    #[test]
    fn round_trip_through_gzip_and_validation() {
        let original = report(vec![change(1), change(2)]);
        let decoded = decode(&original.encode(), true).unwrap();
        assert_eq!(decoded, original);
        let valid = decoded.validate(NOW).unwrap();
        assert_eq!(valid.items.len(), 2);
        assert_eq!(valid.items[1].change_seq, 2);
        assert_eq!(valid.items[0].health, Health::Healthy);
        assert_eq!(
            Change::from_observed(&valid.items[0]),
            change(1),
            "wire form round-trips"
        );
    }

    #[test]
    fn a_reused_encoder_gives_the_bodies_a_fresh_one_gives() {
        let mut heartbeat = report(vec![]);
        heartbeat.kind = ReportKind::Heartbeat;
        heartbeat.report_seq = 0;
        let mut snapshot = report((1..=400).map(change).collect());
        snapshot.kind = ReportKind::Snapshot;
        snapshot.change_seq_high = 401;
        // Messages that compress poorly, so that the body outgrows the first guess of its size.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for (n, c) in snapshot.changes.iter_mut().enumerate() {
            c.name = format!("app-{n:03}");
            c.message = (0..32)
                .map(|_| {
                    state = state
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                    format!("{:016x}", state >> 1)
                })
                .collect();
        }
        let mut encoder = ReportEncoder::new();
        // A large report between small ones: what the compressor kept from it must not leak
        // into the next body.
        for original in [
            &heartbeat,
            &snapshot,
            &heartbeat,
            &report(vec![change(1), change(2)]),
            &snapshot,
        ] {
            let body = encoder.encode(original);
            assert_eq!(&decode(&body, true).unwrap(), original);
            assert_eq!(body, original.encode(), "the same bytes as Report::encode");
        }
        let json = serde_json::to_vec(&snapshot).unwrap();
        assert!(
            snapshot.encode().len() > json.len() / 4 + 64,
            "the snapshot's body outgrows the encoder's first guess of its size"
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        type Mutation = Box<dyn Fn(&mut Report)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("cluster", Box::new(|r| r.cluster = "Store 1".into())),
            ("seq", Box::new(|r| r.report_seq = 0)),
            (
                "changes[1].kind",
                Box::new(|r| r.changes[1].kind = "Deployment".into()),
            ),
            (
                "changes[0].app",
                Box::new(|r| r.changes[0].app = Some("Bad_App".into())),
            ),
            (
                "changes[0].version",
                Box::new(|r| r.changes[0].version = Some("1 2".into())),
            ),
            (
                "changes[0].content_hash",
                Box::new(|r| r.changes[0].content_hash = Some("md5:x".into())),
            ),
            (
                "changes[1].health",
                Box::new(|r| r.changes[1].health = "Healthy".into()),
            ),
            (
                "changes[0].sync",
                Box::new(|r| r.changes[0].sync = "drifted".into()),
            ),
            (
                "changes[0].observed_at",
                Box::new(|r| r.changes[0].observed_at = NOW.seconds() + 2 * 86_400),
            ),
            (
                "changes[0].transitioned_at",
                Box::new(|r| r.changes[0].transitioned_at = Some(-1)),
            ),
            (
                "changes[0].name",
                Box::new(|r| r.changes[0].name = String::new()),
            ),
            (
                "changes[0].name",
                Box::new(|r| r.changes[0].name = "x".repeat(300)),
            ),
            (
                "changes[0].namespace",
                Box::new(|r| r.changes[0].namespace = "a\u{0}b".into()),
            ),
            (
                "changes[0].change_seq",
                Box::new(|r| r.changes[0].change_seq = 0),
            ),
            ("changes", Box::new(|r| r.kind = ReportKind::Heartbeat)),
            ("seq", Box::new(|r| r.report_seq = u64::MAX)),
            ("seq", Box::new(|r| r.report_seq = MAX_SEQ + 1)),
            (
                "seq",
                Box::new(|r| r.report_seq = NOW_MICROS + MAX_SEQ_AHEAD_MICROS + 1),
            ),
            (
                "changes[1].change_seq",
                Box::new(|r| r.changes[1].change_seq = u64::MAX),
            ),
            (
                "changes[0].change_seq",
                Box::new(|r| r.changes[0].change_seq = NOW_MICROS + 2 * MAX_SEQ_AHEAD_MICROS),
            ),
            (
                "change_seq_high",
                Box::new(|r| r.change_seq_high = u64::MAX),
            ),
            (
                "changes[1].change_seq",
                Box::new(|r| {
                    r.changes[1].change_seq = 1;
                    r.changes[1].health = "degraded".into();
                }),
            ),
        ];
        for (field, mutate) in cases {
            let mut r = report(vec![change(1), change(2)]);
            mutate(&mut r);
            let err = r.validate(NOW).unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
    }

    #[test]
    fn numbers_up_to_the_limits_are_accepted() {
        let limit = NOW_MICROS + MAX_SEQ_AHEAD_MICROS;
        assert_eq!(seq_limit(NOW), limit);
        let mut r = report(vec![change(1), change(limit)]);
        r.report_seq = limit;
        r.kind = ReportKind::Snapshot;
        r.change_seq_high = limit;
        let valid = r.validate(NOW).unwrap();
        assert_eq!((valid.report_seq, valid.change_seq_high), (limit, limit));
        // Far in the future the day ahead is cut at the largest exact JSON integer.
        assert_eq!(seq_limit(Timestamp(i64::MAX / 2)), MAX_SEQ);
        assert_eq!(seq_limit(Timestamp(-5)), MAX_SEQ_AHEAD_MICROS);
        // The same change twice in one report is a redelivery within it, not a conflict.
        report(vec![change(3), change(3)]).validate(NOW).unwrap();
        let mut heartbeat = report(vec![]);
        heartbeat.kind = ReportKind::Heartbeat;
        heartbeat.report_seq = 0;
        heartbeat.validate(NOW).unwrap();
    }

    #[test]
    fn long_messages_are_cut_not_refused() {
        let mut c = change(1);
        c.message = "é".repeat(5_000);
        let valid = report(vec![c]).validate(NOW).unwrap();
        assert!(valid.items[0].message.len() <= ObservedItem::MAX_MESSAGE_BYTES);
        assert!(valid.items[0].message.chars().all(|ch| ch == 'é'));
    }

    #[test]
    fn bad_bodies_get_clear_errors() {
        assert_eq!(
            decode(b"not gzip", true)
                .unwrap_err()
                .to_string()
                .split(':')
                .next(),
            Some("body is not valid gzip")
        );
        let mut truncated = report(vec![change(1)]).encode();
        truncated.truncate(truncated.len() / 2);
        assert!(matches!(
            decode(&truncated, true),
            Err(DecodeError::BadGzip(_))
        ));
        assert!(matches!(
            decode(b"{\"cluster\": 1}", false),
            Err(DecodeError::BadJson(_))
        ));
        let unknown = decode(
            br#"{"cluster":"a","agent_version":"1","seq":1,"sent_at":0,"kind":"delta","extra":1}"#,
            false,
        )
        .unwrap_err();
        assert!(
            unknown.to_string().contains("unknown field `extra`"),
            "{unknown}"
        );
        assert_eq!(
            decode(&vec![0; MAX_BODY_BYTES + 1], true),
            Err(DecodeError::TooLarge(MAX_BODY_BYTES + 1))
        );
        // A small body that inflates past the limit is stopped while inflating.
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder
            .write_all(&vec![b' '; MAX_DECOMPRESSED_BYTES + 10])
            .unwrap();
        let bomb = encoder.finish().unwrap();
        assert!(bomb.len() < 200_000, "the bomb is small: {}", bomb.len());
        assert_eq!(decode(&bomb, true), Err(DecodeError::DecompressedTooLarge));
    }
}
