//! The store audit: every change the collector acknowledged is stored, once. Per cluster, the
//! simulator's count of acknowledged changes and their highest change number are set against
//! what `observed_transitions` holds (read with `FINAL`, after every replica has caught up).

use std::collections::HashMap;

use fleetscope_store::Store;
use serde::{Deserialize, Serialize};

use crate::sim::SimFleet;

/// What the audit found.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoreAudit {
    /// Clusters with an acknowledged change or a stored one.
    pub clusters: u64,
    /// Changes the collector acknowledged (distinct per cluster).
    pub acknowledged_changes: u64,
    /// Changes the store holds (distinct per cluster).
    pub stored_changes: u64,
    /// Acknowledged and not stored.
    pub lost: u64,
    /// Stored and never acknowledged: after every outbox emptied, a store holding more than was
    /// acknowledged holds something no agent sent, or sent under another number.
    pub unacknowledged: u64,
    /// Held twice after collapsing (which the table's key should make impossible).
    pub stored_twice: u64,
    /// Rows of `observed_arrivals` beyond the first of their change: reports inserted again
    /// after their acknowledgement was lost. Harmless (readers apply a change once, by its
    /// number); counted to show retries.
    pub arrived_again: u64,
    /// The first clusters that differ, for the report.
    pub differences: Vec<String>,
}

impl StoreAudit {
    /// True when nothing acknowledged is missing, extra or held twice.
    pub fn holds(&self) -> bool {
        self.lost == 0 && self.unacknowledged == 0 && self.stored_twice == 0
    }
}

/// Audits `store` against `fleet`. `replicas` are stores connected to each server directly, whose
/// replicas are synced first (empty on a single server). Call it when every outbox is empty.
pub async fn audit(
    store: &Store,
    replicas: &[Store],
    fleet: &std::sync::Mutex<SimFleet>,
) -> anyhow::Result<StoreAudit> {
    for replica in replicas {
        replica.sync_replicas().await?;
    }
    let stored = store.stored_changes().await?;
    let arrived_again = store.arrivals_beyond_first().await?;
    let acknowledged: HashMap<String, (u64, u64)> = {
        let fleet = fleet.lock().expect("fleet lock");
        fleet
            .clusters
            .iter()
            .filter(|c| c.acked_changes > 0)
            .map(|c| (c.id.clone(), (c.acked_changes, c.acked_high)))
            .collect()
    };
    Ok(compare(&acknowledged, &stored, arrived_again))
}

/// The audit of `stored` against `acknowledged` (cluster → (changes, highest number)).
fn compare(
    acknowledged: &HashMap<String, (u64, u64)>,
    stored: &[fleetscope_store::StoredChanges],
    arrived_again: u64,
) -> StoreAudit {
    let mut audit = StoreAudit {
        arrived_again,
        ..StoreAudit::default()
    };
    let mut seen = std::collections::HashSet::new();
    for row in stored {
        seen.insert(row.cluster_id.as_str());
        let (acked, high) = acknowledged.get(&row.cluster_id).copied().unwrap_or((0, 0));
        audit.stored_changes += row.changes;
        audit.stored_twice += row.rows - row.changes;
        audit.lost += acked.saturating_sub(row.changes);
        audit.unacknowledged += row.changes.saturating_sub(acked);
        if (acked, high) != (row.changes, row.high) || row.rows != row.changes {
            note(
                &mut audit,
                format!(
                    "{}: {acked} changes acknowledged up to number {high}; stored {} up to {} in {} rows",
                    row.cluster_id, row.changes, row.high, row.rows
                ),
            );
        }
    }
    for (cluster, &(acked, high)) in acknowledged {
        if !seen.contains(cluster.as_str()) {
            audit.lost += acked;
            note(
                &mut audit,
                format!("{cluster}: {acked} changes acknowledged up to number {high}; none stored"),
            );
        }
    }
    audit.acknowledged_changes = acknowledged.values().map(|(n, _)| n).sum();
    audit.clusters = seen.len() as u64
        + acknowledged
            .keys()
            .filter(|c| !seen.contains(c.as_str()))
            .count() as u64;
    audit.differences.sort();
    audit
}

fn note(audit: &mut StoreAudit, difference: String) {
    if audit.differences.len() < 10 {
        audit.differences.push(difference);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetscope_store::StoredChanges;

    fn stored(cluster: &str, rows: u64, changes: u64, high: u64) -> StoredChanges {
        StoredChanges {
            cluster_id: cluster.into(),
            rows,
            changes,
            high,
        }
    }

    #[test]
    fn a_store_holding_exactly_what_was_acknowledged_holds() {
        let acked = HashMap::from([("a".to_owned(), (100, 104)), ("b".to_owned(), (3, 3))]);
        let audit = compare(
            &acked,
            &[stored("a", 100, 100, 104), stored("b", 3, 3, 3)],
            7,
        );
        assert!(audit.holds(), "{audit:?}");
        assert_eq!(audit.acknowledged_changes, 103);
        assert_eq!(audit.stored_changes, 103);
        assert_eq!(audit.arrived_again, 7);
        assert_eq!(audit.clusters, 2);
        assert!(audit.differences.is_empty());
    }

    #[test]
    fn missing_extra_and_doubled_changes_are_counted() {
        let acked = HashMap::from([
            ("a".to_owned(), (100, 104)),
            ("b".to_owned(), (3, 3)),
            ("gone".to_owned(), (5, 5)),
        ]);
        let audit = compare(
            &acked,
            &[
                stored("a", 99, 99, 103),
                stored("b", 5, 4, 4),
                stored("stranger", 1, 1, 1),
            ],
            0,
        );
        assert!(!audit.holds());
        assert_eq!(audit.lost, 1 + 5);
        assert_eq!(audit.unacknowledged, 1 + 1);
        assert_eq!(audit.stored_twice, 1);
        assert_eq!(audit.clusters, 4);
        assert_eq!(audit.differences.len(), 4, "{:?}", audit.differences);
    }
}
