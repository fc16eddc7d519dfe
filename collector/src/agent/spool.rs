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

use crate::protocol::{self, Change, Report, ReportKind, MAX_SEQ};

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
    /// After a renumbering: the first new change number. Changes of a delta pushed later with
    /// a lower number were numbered before the renumbering (gathered, not yet spooled) and are
    /// numbered again, so they stay newer than the renumbered reports.
    change_floor: u64,
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

/// Refuses counters past the largest number the protocol allows. Counters start near the clock
/// in microseconds (about 2^50.6 in 2026) and grow by one per report or change, so an agent
/// meets this only with a broken clock or state file.
fn check_counters(counters: &Counters) -> std::io::Result<()> {
    for (name, next) in [
        ("report", counters.next_report_seq),
        ("change", counters.next_change_seq),
    ] {
        if next > MAX_SEQ {
            return Err(std::io::Error::other(format!(
                "the next {name} number {next} is past the largest number the protocol allows, {MAX_SEQ}; \
                 check the clock, then remove state.json and the waiting reports from the spool"
            )));
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
    /// Both counters start at the saved ones or at the wall clock in microseconds, whichever is
    /// higher, never at 1: an agent whose spool was lost or restored from an older copy (an
    /// emptied volume, a reinstall, a backup) must not number below what the collector already
    /// stored for its cluster, or its reports would be taken for duplicates and its changes
    /// lose to older ones. An agent hands out far fewer than a million numbers a second, so
    /// numbers taken from the clock stay above every number an earlier agent of the cluster
    /// handed out, as long as the clock did not go back (for that, see [`Spool::renumber_above`]).
    pub fn open(dir: impl Into<PathBuf>, max_bytes: u64) -> std::io::Result<Spool> {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_micros() as u64);
        Spool::open_starting_at(dir, max_bytes, micros.max(1))
    }

    /// [`Spool::open`], with the clock in microseconds given: the counters start at
    /// `clock_micros` unless the saved ones are higher.
    pub fn open_starting_at(
        dir: impl Into<PathBuf>,
        max_bytes: u64,
        clock_micros: u64,
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
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Counters::default(),
            Err(err) => return Err(err),
        };
        counters.next_report_seq = counters.next_report_seq.max(clock_micros);
        counters.next_change_seq = counters.next_change_seq.max(clock_micros);
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
            counters.next_report_seq = counters.next_report_seq.max(last.saturating_add(1));
        }
        check_counters(&counters)?;
        Ok(Spool {
            dir,
            max_bytes,
            pending,
            counters,
            compactions: 0,
            change_floor: 0,
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
        check_counters(&self.counters)?;
        if report.kind == ReportKind::Delta
            && report
                .changes
                .iter()
                .any(|c| c.change_seq < self.change_floor)
        {
            let mut order: Vec<usize> = (0..report.changes.len())
                .filter(|&i| report.changes[i].change_seq < self.change_floor)
                .collect();
            order.sort_by_key(|&i| report.changes[i].change_seq);
            for i in order {
                report.changes[i].change_seq = self.next_change_seq();
            }
        }
        report.report_seq = self.counters.next_report_seq;
        self.counters.next_report_seq += 1;
        self.save_counters()?;
        let body = report.encode();
        write_atomically(&report_file(&self.dir, report.report_seq), &body)?;
        self.pending.insert(report.report_seq, body.len() as u64);
        if self.pending_bytes() > self.max_bytes && self.pending.len() > 1 {
            self.compact()?;
        }
        Ok(report.report_seq)
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

    /// The waiting reports' numbers, oldest first.
    pub fn pending_seqs(&self) -> Vec<u64> {
        self.pending.keys().copied().collect()
    }

    /// The collector has acknowledged report numbers up to `acked_seq` and stored change
    /// numbers up to `highest_change_seq` for this cluster, at or above what this spool hands
    /// out: its counters are behind (a clock that went back, a restored spool). Moves both
    /// counters above the collector's numbers and gives every waiting report, oldest first, a
    /// new report number and its changes new change numbers, keeping their order, so the
    /// collector stores them and they win over what it holds. Returns how many reports were
    /// renumbered.
    ///
    /// The new files are written before the old ones are removed; a crash in between leaves
    /// both, which are then sent twice in order, never lost.
    pub fn renumber_above(
        &mut self,
        acked_seq: u64,
        highest_change_seq: u64,
    ) -> std::io::Result<usize> {
        let mut reports = Vec::with_capacity(self.pending.len());
        for &seq in self.pending.keys() {
            reports.push((seq, self.read_report(seq)?));
        }
        // Every change number in use, snapshots' `change_seq_high` included, mapped in order
        // onto numbers above the collector's.
        let mut numbers: BTreeMap<u64, u64> = BTreeMap::new();
        for (_, report) in &reports {
            for change in &report.changes {
                numbers.insert(change.change_seq, 0);
            }
            if report.change_seq_high != 0 {
                numbers.insert(report.change_seq_high, 0);
            }
        }
        let mut next_change = self
            .counters
            .next_change_seq
            .max(highest_change_seq.saturating_add(1));
        for new in numbers.values_mut() {
            *new = next_change;
            next_change += 1;
        }
        let mut next_report = self
            .counters
            .next_report_seq
            .max(acked_seq.saturating_add(1));
        let renumbered: Vec<(u64, Report)> = reports
            .into_iter()
            .map(|(old, mut report)| {
                report.report_seq = next_report;
                next_report += 1;
                for change in &mut report.changes {
                    change.change_seq = numbers[&change.change_seq];
                }
                if report.change_seq_high != 0 {
                    report.change_seq_high = numbers[&report.change_seq_high];
                }
                (old, report)
            })
            .collect();
        let counters = Counters {
            next_report_seq: next_report,
            next_change_seq: next_change,
        };
        check_counters(&counters)?;
        self.change_floor = self
            .counters
            .next_change_seq
            .max(highest_change_seq.saturating_add(1));
        self.counters = counters;
        self.save_counters()?;
        let mut pending = BTreeMap::new();
        for (_, report) in &renumbered {
            let body = report.encode();
            write_atomically(&report_file(&self.dir, report.report_seq), &body)?;
            pending.insert(report.report_seq, body.len() as u64);
        }
        for (old, _) in &renumbered {
            if !pending.contains_key(old) {
                match fs::remove_file(report_file(&self.dir, *old)) {
                    Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
                    _ => {}
                }
            }
        }
        self.pending = pending;
        Ok(renumbered.len())
    }

    /// The waiting report numbered `seq`, decoded.
    fn read_report(&self, seq: u64) -> std::io::Result<Report> {
        let body = fs::read(report_file(&self.dir, seq))?;
        protocol::decode(&body, true).map_err(|err| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("spooled report {seq}: {err}"),
            )
        })
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
            let report = self.read_report(seq)?;
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
        merged.report_seq = newest;
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
            labels: Default::default(),
            target_revision: String::new(),
            images: Vec::new(),
        }
    }

    fn delta(changes: Vec<Change>) -> Report {
        Report {
            cluster: "edge-1".into(),
            agent_version: "0.1.0".into(),
            report_seq: 0,
            sent_at: 1_800_000_000,
            kind: ReportKind::Delta,
            reconcilers: Default::default(),
            change_seq_high: 0,
            changes,
            stamped_apps: Vec::new(),
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
        let mut spool = Spool::open_starting_at(dir.path(), 1 << 20, 1).unwrap();
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
        // A spool with counters keeps counting from them (or from the clock, if that moved on).
        drop(first);
        let mut again = Spool::open(first_dir.path(), 1 << 20).unwrap();
        assert!(again.push(delta(vec![])).unwrap() > last);
    }

    #[test]
    fn a_restored_spool_numbers_from_the_clock_when_that_is_higher() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut spool = Spool::open_starting_at(dir.path(), 1 << 20, 10).unwrap();
            let seq = spool.next_change_seq();
            spool.push(delta(vec![change(seq, "app", "1.0")])).unwrap();
        }
        // The same state file found again later (a restored backup, a reinstall that kept the
        // volume): the clock has moved on past its counters.
        let mut restored = Spool::open_starting_at(dir.path(), 1 << 20, 5_000).unwrap();
        assert_eq!(restored.next_change_seq(), 5_000);
        assert_eq!(restored.push(delta(vec![])).unwrap(), 5_000);
        assert_eq!(
            restored.oldest().unwrap().unwrap().0,
            10,
            "the waiting report keeps its number and goes first"
        );
        // Counters ahead of the clock keep counting from where they are.
        drop(restored);
        let mut again = Spool::open_starting_at(dir.path(), 1 << 20, 20).unwrap();
        assert_eq!(again.push(delta(vec![])).unwrap(), 5_001);
    }

    #[test]
    fn renumbering_moves_waiting_reports_above_the_collectors_numbers_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open_starting_at(dir.path(), 1 << 20, 1).unwrap();
        for version in ["1.0", "1.1"] {
            let seq = spool.next_change_seq();
            spool
                .push(delta(vec![change(seq, "app", version)]))
                .unwrap();
        }
        let high = spool.next_change_seq();
        spool
            .push(Report {
                kind: ReportKind::Snapshot,
                change_seq_high: high,
                ..delta(vec![change(2, "app", "1.1")])
            })
            .unwrap();
        // A change numbered before the renumbering and spooled after it.
        let gathered = spool.next_change_seq();
        assert_eq!(spool.renumber_above(100, 500).unwrap(), 3);
        assert_eq!(spool.pending_seqs(), vec![101, 102, 103]);
        let mut seen = Vec::new();
        for seq in spool.pending_seqs() {
            let body = fs::read(report_file(dir.path(), seq)).unwrap();
            let report = protocol::decode(&body, true).unwrap();
            assert_eq!(report.report_seq, seq);
            seen.push((
                report.kind,
                report.changes[0].change_seq,
                report.changes[0].version.clone().unwrap(),
                report.change_seq_high,
            ));
        }
        assert_eq!(
            seen,
            vec![
                (ReportKind::Delta, 501, "1.0".to_owned(), 0),
                (ReportKind::Delta, 502, "1.1".to_owned(), 0),
                (ReportKind::Snapshot, 502, "1.1".to_owned(), 503),
            ]
        );
        assert!(!report_file(dir.path(), 1).exists(), "old files are gone");
        let seq = spool
            .push(delta(vec![change(gathered, "app", "1.2")]))
            .unwrap();
        assert_eq!(seq, 104);
        let (_, body) = (seq, fs::read(report_file(dir.path(), seq)).unwrap());
        assert_eq!(
            protocol::decode(&body, true).unwrap().changes[0].change_seq,
            504,
            "numbered again above the renumbered reports"
        );
        // The renumbered spool survives a restart.
        drop(spool);
        let spool = Spool::open_starting_at(dir.path(), 1 << 20, 1).unwrap();
        assert_eq!(spool.pending_seqs(), vec![101, 102, 103, 104]);
        assert_eq!(spool.peek_change_seq(), 505);
    }

    #[test]
    fn counters_past_the_largest_number_stop_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::open_starting_at(dir.path(), 1 << 20, MAX_SEQ).unwrap();
        assert_eq!(spool.push(delta(vec![])).unwrap(), MAX_SEQ);
        let err = spool.push(delta(vec![])).unwrap_err();
        assert!(err.to_string().contains("past the largest number"), "{err}");
        drop(spool);
        let err = Spool::open_starting_at(dir.path(), 1 << 20, 1).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the next report number 9007199254740992 is past"),
            "{err}"
        );
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
