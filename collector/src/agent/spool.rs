//! The agent's on-disk spool: every report is written here before it is sent and removed only
//! when the collector acknowledged it, so a change survives a dead link and an agent restart.
//!
//! One file per report (`report-<seq>.json.gz`, the exact request body), written to a temporary
//! name, synced and renamed, so a crash leaves either the whole report or none of it. Counters
//! (`state.json`) are kept the same way. The spool is bounded: past `max_bytes` it compacts all
//! waiting reports into one that keeps the latest change of every object, so the final state of
//! every object always survives while intermediate states may not.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::{self, Change, Report, ReportKind};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Counters {
    next_report_seq: u64,
    next_change_seq: u64,
}

#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    pending: BTreeMap<u64, u64>,
    counters: Counters,
    compactions: u64,
}

/// Writes `bytes` to `path` so that a crash leaves the old content or the new, never a mix.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        // Make the rename itself durable.
        if let Ok(dir) = fs::File::open(parent) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

fn report_file(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("report-{seq:020}.json.gz"))
}

impl Spool {
    /// Opens (or creates) the spool in `dir`, picking up reports left by an earlier run.
    ///
    /// A new spool (no counters file) numbers its reports and changes from the wall clock in
    /// microseconds, not from 1: an agent whose spool was lost (an emptied volume, a
    /// reinstall) must not start below the numbers the collector already stored for its
    /// cluster, or its reports would be taken for duplicates and its changes lose to older
    /// ones. An agent hands out far fewer than a million numbers a second, so numbers started
    /// from the clock stay above every number an earlier agent of the cluster handed out.
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64) -> std::io::Result<Spool> {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_micros() as u64);
        Spool::open_starting_at(dir, max_bytes, micros.max(1))
    }

    /// [`Spool::open`], with the first number of a new spool given.
    pub fn open_starting_at(
        dir: impl Into<PathBuf>,
        max_bytes: u64,
        first: u64,
    ) -> std::io::Result<Spool> {
        let dir = dir.into();
        fs::create_dir_all(&dir)?;
        let mut counters: Counters = match fs::read(dir.join("state.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|err| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {err}", dir.join("state.json").display()),
                )
            })?,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Counters {
                next_report_seq: first,
                next_change_seq: first,
            },
            Err(err) => return Err(err),
        };
        let mut pending = BTreeMap::new();
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(seq) = name
                .strip_prefix("report-")
                .and_then(|rest| rest.strip_suffix(".json.gz"))
                .and_then(|s| s.parse::<u64>().ok())
            {
                pending.insert(seq, entry.metadata()?.len());
            } else if name.ends_with(".tmp") {
                // A write that a crash interrupted: it was never acknowledged as spooled.
                let _ = fs::remove_file(entry.path());
            }
        }
        // Never reuse a number, even if the counters file is older than the reports.
        if let Some(last) = pending.keys().next_back() {
            counters.next_report_seq = counters.next_report_seq.max(last + 1);
        }
        Ok(Spool {
            dir,
            max_bytes,
            pending,
            counters,
            compactions: 0,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new change number, larger than every one handed out before (also across restarts,
    /// once the next report is spooled or [`Spool::save_counters`] ran).
    pub fn next_change_seq(&mut self) -> u64 {
        let seq = self.counters.next_change_seq;
        self.counters.next_change_seq += 1;
        seq
    }

    /// The next change number without taking it.
    pub fn peek_change_seq(&self) -> u64 {
        self.counters.next_change_seq
    }

    pub fn save_counters(&self) -> std::io::Result<()> {
        write_atomically(
            &self.dir.join("state.json"),
            &serde_json::to_vec(&self.counters).expect("counters serialize"),
        )
    }

    /// Gives `report` the next report number, writes it, and compacts when over the bound.
    pub fn push(&mut self, mut report: Report) -> std::io::Result<u64> {
        report.seq = self.counters.next_report_seq;
        self.counters.next_report_seq += 1;
        self.save_counters()?;
        let body = report.encode();
        write_atomically(&report_file(&self.dir, report.seq), &body)?;
        self.pending.insert(report.seq, body.len() as u64);
        if self.pending_bytes() > self.max_bytes && self.pending.len() > 1 {
            self.compact()?;
        }
        Ok(report.seq)
    }

    /// The oldest waiting report: its number and request body.
    pub fn oldest(&self) -> std::io::Result<Option<(u64, Vec<u8>)>> {
        match self.pending.keys().next() {
            Some(&seq) => Ok(Some((seq, fs::read(report_file(&self.dir, seq))?))),
            None => Ok(None),
        }
    }

    /// The collector acknowledged report `seq`: forget it.
    pub fn ack(&mut self, seq: u64) -> std::io::Result<()> {
        if self.pending.remove(&seq).is_some() {
            match fs::remove_file(report_file(&self.dir, seq)) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        Ok(())
    }

    pub fn pending_reports(&self) -> usize {
        self.pending.len()
    }

    pub fn pending_bytes(&self) -> u64 {
        self.pending.values().sum()
    }

    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    /// Merges every waiting report into one delta that keeps, per object, the change with the
    /// highest change number. It takes the number of the newest report it replaces, so it is
    /// newer than anything the collector may already have acknowledged.
    fn compact(&mut self) -> std::io::Result<()> {
        let mut latest: HashMap<(String, String, String), Change> = HashMap::new();
        let mut template: Option<Report> = None;
        for &seq in self.pending.keys() {
            let body = fs::read(report_file(&self.dir, seq))?;
            let report = protocol::decode(&body, true).map_err(|err| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("spooled report {seq}: {err}"),
                )
            })?;
            for change in &report.changes {
                let key = (
                    change.kind.clone(),
                    change.namespace.clone(),
                    change.name.clone(),
                );
                if latest
                    .get(&key)
                    .is_none_or(|kept| kept.change_seq < change.change_seq)
                {
                    latest.insert(key, change.clone());
                }
            }
            template = Some(report);
        }
        let Some(mut merged) = template else {
            return Ok(());
        };
        let newest = *self
            .pending
            .keys()
            .next_back()
            .expect("pending is not empty");
        let mut changes: Vec<Change> = latest.into_values().collect();
        changes.sort_by_key(|c| c.change_seq);
        merged.kind = ReportKind::Delta;
        merged.change_seq_high = 0;
        merged.changes = changes;
        merged.seq = newest;
        let body = merged.encode();
        // Write the merged report under the newest number first, then drop the older files.
        write_atomically(&report_file(&self.dir, newest), &body)?;
        let older: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|seq| *seq != newest)
            .collect();
        for seq in older {
            self.pending.remove(&seq);
            let _ = fs::remove_file(report_file(&self.dir, seq));
        }
        self.pending.insert(newest, body.len() as u64);
        self.compactions += 1;
        tracing::warn!(
            bytes = self.pending_bytes(),
            max_bytes = self.max_bytes,
            objects = merged.changes.len(),
            "spool full: compacted waiting reports to the latest state of each object"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(seq: u64, name: &str, version: &str) -> Change {
        Change {
            change_seq: seq,
            kind: "Kustomization".into(),
            namespace: "flux-system".into(),
            name: name.into(),
            app: None,
            version: Some(version.into()),
            content_hash: None,
            applied_revision: String::new(),
            health: "healthy".into(),
            sync: "unknown".into(),
            reason: String::new(),
            message: "x".repeat(200),
            transitioned_at: None,
            observed_at: 1_800_000_000,
            deleted: false,
        }
    }

    fn delta(changes: Vec<Change>) -> Report {
        Report {
            cluster: "edge-1".into(),
            agent_version: "0.1.0".into(),
            seq: 0,
            sent_at: 1_800_000_000,
            kind: ReportKind::Delta,
            reconcilers: Default::default(),
            change_seq_high: 0,
            changes,
        }
    }

    #[test]
    fn survives_a_restart_in_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut spool = Spool::open_starting_at(dir.path(), 1 << 20, 1).unwrap();
            for i in 0..3 {
                let seq = spool.next_change_seq();
                spool
                    .push(delta(vec![change(seq, &format!("app-{i}"), "1.0")]))
                    .unwrap();
            }
            let (first, _) = spool.oldest().unwrap().unwrap();
            spool.ack(first).unwrap();
        }
        fs::write(dir.path().join("report-00000000000000000099.tmp"), b"half").unwrap();
        let mut spool = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(
            spool.pending_reports(),
            2,
            "the acknowledged report is gone, the other two wait"
        );
        let (seq, body) = spool.oldest().unwrap().unwrap();
        assert_eq!(seq, 2);
        assert_eq!(
            protocol::decode(&body, true).unwrap().changes[0].name,
            "app-1"
        );
        assert_eq!(
            spool.next_change_seq(),
            4,
            "change numbers continue after a restart"
        );
        let next = spool.push(delta(vec![])).unwrap();
        assert_eq!(next, 4, "report numbers continue after a restart");
        assert!(
            !dir.path().join("report-00000000000000000099.tmp").exists(),
            "an interrupted write is cleaned up"
        );
    }

    #[test]
    fn a_new_spool_numbers_above_an_agent_that_lost_its_spool() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let first_dir = tempfile::tempdir().unwrap();
        let mut first = Spool::open(first_dir.path(), 1 << 20).unwrap();
        let change_seq = first.next_change_seq();
        assert!(change_seq >= before, "{change_seq} < {before}");
        let mut last = 0;
        for _ in 0..1_000 {
            last = first.push(delta(vec![])).unwrap();
        }
        // The same cluster's agent starts again on an empty volume.
        let second_dir = tempfile::tempdir().unwrap();
        let mut second = Spool::open(second_dir.path(), 1 << 20).unwrap();
        let seq = second.push(delta(vec![])).unwrap();
        assert!(seq > last, "report {seq} must follow {last}");
        assert!(second.next_change_seq() > change_seq);
        // A spool with counters keeps counting from them.
        drop(first);
        let mut again = Spool::open(first_dir.path(), 1 << 20).unwrap();
        assert_eq!(again.push(delta(vec![])).unwrap(), last + 1);
    }

    #[test]
    fn compaction_keeps_the_final_state_of_every_object() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open_starting_at(dir.path(), 2_000, 1).unwrap();
        for round in 0..50 {
            let changes: Vec<Change> = (0..5)
                .map(|object| {
                    let seq = spool.next_change_seq();
                    change(seq, &format!("app-{object}"), &format!("1.{round}"))
                })
                .collect();
            spool.push(delta(changes)).unwrap();
        }
        assert!(spool.compactions() > 0, "the bound was hit");
        assert!(
            spool.pending_bytes() <= 2_000 + 1_000,
            "bounded: {}",
            spool.pending_bytes()
        );
        // Everything that waits, replayed in order, ends at version 1.49 for every object.
        let mut state: HashMap<String, (u64, String)> = HashMap::new();
        let mut last_seq = 0;
        while let Some((seq, body)) = spool.oldest().unwrap() {
            assert!(seq > last_seq, "in order");
            last_seq = seq;
            for change in protocol::decode(&body, true).unwrap().changes {
                let entry = state
                    .entry(change.name.clone())
                    .or_insert((0, String::new()));
                if change.change_seq > entry.0 {
                    *entry = (change.change_seq, change.version.unwrap());
                }
            }
            spool.ack(seq).unwrap();
        }
        assert_eq!(state.len(), 5);
        assert!(
            state.values().all(|(_, version)| version == "1.49"),
            "{state:?}"
        );
        assert_eq!(last_seq, 50, "the merged report carries the newest number");
    }
}
