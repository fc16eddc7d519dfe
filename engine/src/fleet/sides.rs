//! What the failure insights count, kept current as clusters change: for every app, which
//! clusters (by slot) hold it failing, in sync or in another state, as bit sets; for every
//! cluster, its attribute values (labels, groups at every level, environment, reconciler,
//! agent version) as numbers of one table of values. A question about one app then reads the
//! app's bit sets and short lists of numbers in slot order, instead of every selected cluster's
//! records, pairs and inventory entry one after another.
//!
//! Kept as the fleet works clusters out again (a changed inventory entry or heartbeat marks its
//! cluster for that, as a new observed row does), and checked against the clusters' records by
//! [`Sides::differences`].

use std::collections::HashMap;
use std::sync::Arc;

use fleetscope_model::DriftState;
use smallvec::SmallVec;

use crate::fleet::records::{ClusterRec, Filter};
use crate::rollups::Counted;
use crate::symbols::{Interner, Symbols};

/// The kinds of attribute compared, in the order findings with equal evidence are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attribute {
    /// A label `key=value`.
    Label,
    /// A group at any level.
    Group,
    /// The environment.
    Environment,
    /// The reconciler, `flux` or `argocd`.
    Reconciler,
    /// The agent version of the cluster's last heartbeat.
    AgentVersion,
}

impl Attribute {
    /// The attribute's name, as the API's answer and the dashboards' panel give it.
    pub fn name(self) -> &'static str {
        match self {
            Attribute::Label => "label",
            Attribute::Group => "group",
            Attribute::Environment => "environment",
            Attribute::Reconciler => "reconciler",
            Attribute::AgentVersion => "agent_version",
        }
    }
}

/// One attribute value, as symbols of the fleet's table: a label is (key, value), every other
/// attribute has its value in the first place and 0 in the second.
pub type ValueKey = (Attribute, u32, u32);

/// Which side of the comparison a pair's state puts its cluster on: failing (`failed`,
/// `out_of_sync`) or in sync; any other state is on neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Failing,
    InSync,
}

/// The side of a pair in `state`.
pub fn side(state: DriftState) -> Option<Side> {
    match state {
        DriftState::Failed | DriftState::OutOfSync => Some(Side::Failing),
        DriftState::InSync => Some(Side::InSync),
        _ => None,
    }
}

/// Where one cluster stands on one app: without the pair, or with it on a side or on neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    Absent,
    Held(Option<Side>),
}

fn standing(state: Option<DriftState>) -> Standing {
    state.map_or(Standing::Absent, |s| Standing::Held(side(s)))
}

/// One app's clusters by slot: those that hold its pair, and of them those failing and those
/// in sync, one bit per slot.
#[derive(Debug, Clone, Default)]
struct AppSlots {
    held: Vec<u64>,
    failing: Vec<u64>,
    in_sync: Vec<u64>,
}

impl AppSlots {
    fn set(&mut self, slot: u32, standing: Standing) {
        let (word, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        for bits in [&mut self.held, &mut self.failing, &mut self.in_sync] {
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            bits[word] &= !bit;
        }
        if let Standing::Held(side) = standing {
            self.held[word] |= bit;
            match side {
                Some(Side::Failing) => self.failing[word] |= bit,
                Some(Side::InSync) => self.in_sync[word] |= bit,
                None => {}
            }
        }
    }

    fn get(&self, slot: u32) -> Standing {
        let (word, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        let has = |bits: &[u64]| bits.get(word).is_some_and(|w| w & bit != 0);
        if !has(&self.held) {
            Standing::Absent
        } else if has(&self.failing) {
            Standing::Held(Some(Side::Failing))
        } else if has(&self.in_sync) {
            Standing::Held(Some(Side::InSync))
        } else {
            Standing::Held(None)
        }
    }
}

/// Slots to a chunk of rows, as the cluster map's chunks: a snapshot shares whole chunks, and
/// changing one cluster's values copies its chunk only.
const ROW_CHUNK: usize = 256;

/// The value numbers of [`ROW_CHUNK`] slots, one after another: slot `i`'s are
/// `numbers[ends[i - 1]..ends[i]]`. Slots past `ends` have none.
#[derive(Debug, Clone, Default)]
struct RowChunk {
    ends: Vec<u32>,
    numbers: Vec<u32>,
}

impl RowChunk {
    fn row(&self, at: usize) -> &[u32] {
        let Some(&end) = self.ends.get(at) else {
            return &[];
        };
        let start = if at == 0 { 0 } else { self.ends[at - 1] };
        &self.numbers[start as usize..end as usize]
    }

    fn set(&mut self, at: usize, row: &[u32]) {
        let len = u32::try_from(self.numbers.len()).expect("a chunk's rows fit in u32");
        if self.ends.len() <= at {
            self.ends.resize(at + 1, len);
        }
        let start = if at == 0 { 0 } else { self.ends[at - 1] } as usize;
        let end = self.ends[at] as usize;
        self.numbers.splice(start..end, row.iter().copied());
        let (old, new) = (end - start, row.len());
        for e in &mut self.ends[at..] {
            *e = u32::try_from(*e as usize + new - old).expect("a chunk's rows fit in u32");
        }
    }
}

/// How the clusters a question selects split on one app, and on each attribute value they
/// carry: what [`crate::insights`] tests.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SideCounts {
    /// Selected clusters where the app fails, is in sync, and holds it in any other state.
    pub failing: u64,
    pub in_sync: u64,
    pub other: u64,
    /// Each value on at least [`SideCounts::FEWEST`] clusters of the two sides, with how many
    /// failing and in-sync clusters carry it, in no particular order.
    pub values: Vec<(ValueKey, u64, u64)>,
}

impl SideCounts {
    /// The fewest clusters of the two sides a value must be on to be listed: a value on one
    /// cluster only (an identity label) names that cluster and is never tested.
    pub const FEWEST: u64 = 2;
}

/// Every app's clusters by side, and every cluster's attribute values, kept current. Cloning
/// shares everything: a pointer per app and per chunk of rows.
#[derive(Debug, Clone, Default)]
pub struct Sides {
    /// App symbol → its clusters by slot.
    apps: Arc<HashMap<u32, Arc<AppSlots>>>,
    /// Every attribute value any cluster carried, by number.
    values: Interner<ValueKey>,
    /// Each slot's value numbers, [`ROW_CHUNK`] slots to a chunk.
    rows: Vec<Arc<RowChunk>>,
}

/// A cluster's attribute values, in the order its row lists them.
type Keys = SmallVec<[ValueKey; 16]>;

/// The attribute values `cluster` carries: none outside the inventory.
fn keys_of(cluster: &ClusterRec) -> Keys {
    let mut keys = Keys::new();
    let Some(info) = cluster.info.as_deref() else {
        return keys;
    };
    keys.extend(
        info.label_symbols()
            .iter()
            .map(|&(key, value)| (Attribute::Label, key, value)),
    );
    keys.extend(info.prefixes.iter().map(|&p| (Attribute::Group, p, 0)));
    keys.push((Attribute::Environment, info.environment, 0));
    keys.push((Attribute::Reconciler, info.reconciler, 0));
    if let Some(agent) = cluster.agent_version {
        keys.push((Attribute::AgentVersion, agent, 0));
    }
    keys
}

impl Sides {
    fn row(&self, slot: u32) -> &[u32] {
        let (chunk, at) = (slot as usize / ROW_CHUNK, slot as usize % ROW_CHUNK);
        self.rows.get(chunk).map_or(&[], |c| c.row(at))
    }

    /// The value of number `number`.
    pub fn value(&self, number: u32) -> ValueKey {
        *self.values.get(number)
    }

    /// Moves `slot` on every app whose standing differs between `old` and `new` (what the
    /// cluster counted as before and counts as now; pairs sorted by app).
    pub(crate) fn recount(&mut self, slot: u32, old: Option<&Counted>, new: Option<&Counted>) {
        let mut old = old.into_iter().flat_map(Counted::pairs).peekable();
        let mut new = new.into_iter().flat_map(Counted::pairs).peekable();
        loop {
            let (app, was, is) = match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some(o), Some(n)) if o.app() == n.app() => {
                    let r = (o.app(), Some(o.state()), Some(n.state()));
                    old.next();
                    new.next();
                    r
                }
                (Some(o), n) if n.is_none_or(|n| o.app() < n.app()) => {
                    let r = (o.app(), Some(o.state()), None);
                    old.next();
                    r
                }
                (_, Some(n)) => {
                    let r = (n.app(), None, Some(n.state()));
                    new.next();
                    r
                }
                (Some(_), None) => unreachable!("the arm before takes it"),
            };
            let is = standing(is);
            if standing(was) != is {
                let apps = Arc::make_mut(&mut self.apps);
                Arc::make_mut(apps.entry(app).or_default()).set(slot, is);
            }
        }
    }

    /// Sets the attribute values of `slot` to those `cluster` carries, when they differ.
    pub(crate) fn revalue(&mut self, slot: u32, cluster: &ClusterRec) {
        let keys = keys_of(cluster);
        let row = self.row(slot);
        if row.len() == keys.len() && row.iter().zip(&keys).all(|(n, k)| self.value(*n) == *k) {
            return;
        }
        let numbers: SmallVec<[u32; 16]> = keys.iter().map(|k| self.values.intern(*k)).collect();
        let (chunk, at) = (slot as usize / ROW_CHUNK, slot as usize % ROW_CHUNK);
        if self.rows.len() <= chunk {
            self.rows.resize_with(chunk + 1, Arc::default);
        }
        Arc::make_mut(&mut self.rows[chunk]).set(at, &numbers);
    }

    /// For the clusters `filter` selects (its groups, environment and labels; its app is not
    /// looked at) that hold `app`'s pair: how many are on each side, and how many of each side
    /// carry each value.
    pub fn count(&self, symbols: &Symbols, filter: &Filter, app: u32) -> SideCounts {
        let mut counts = SideCounts::default();
        let Some(slots) = self.apps.get(&app) else {
            return counts;
        };
        let Some(required) = self.required(symbols, filter) else {
            return counts;
        };
        // (failing, in sync) clusters per value number.
        let mut by_number = vec![[0u32; 2]; self.values.len()];
        for (word, &held) in slots.held.iter().enumerate() {
            let mut bits = held;
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                let slot = u32::try_from(word * 64).expect("slots fit in u32") + bit;
                let row = self.row(slot);
                if !required.iter().all(|r| row.contains(r)) {
                    continue;
                }
                let mask = 1u64 << bit;
                let which = if slots.failing[word] & mask != 0 {
                    counts.failing += 1;
                    0
                } else if slots.in_sync[word] & mask != 0 {
                    counts.in_sync += 1;
                    1
                } else {
                    counts.other += 1;
                    continue;
                };
                for &number in row {
                    by_number[number as usize][which] += 1;
                }
            }
        }
        counts.values = by_number
            .iter()
            .enumerate()
            .filter(|(_, [f, s])| u64::from(*f) + u64::from(*s) >= SideCounts::FEWEST)
            .map(|(number, [f, s])| {
                let number = u32::try_from(number).expect("value numbers fit in u32");
                (self.value(number), u64::from(*f), u64::from(*s))
            })
            .collect();
        counts
    }

    /// The value numbers a cluster must carry to pass `filter`; `None` when no cluster can
    /// (a value no cluster ever carried).
    fn required(&self, symbols: &Symbols, filter: &Filter) -> Option<Vec<u32>> {
        let mut keys = Vec::new();
        for group in &filter.groups {
            keys.push((Attribute::Group, symbols.find(group.as_str())?, 0));
        }
        if let Some(environment) = &filter.environment {
            keys.push((Attribute::Environment, symbols.find(environment)?, 0));
        }
        for (key, value) in &filter.labels {
            keys.push((Attribute::Label, symbols.find(key)?, symbols.find(value)?));
        }
        keys.iter().map(|k| self.values.find(k)).collect()
    }

    /// What differs between these sides and the clusters' records (`(slot, record)` for every
    /// cluster): each cluster's standing on every app it counts or is set for, and its values.
    /// Empty when they agree.
    pub fn differences<'a>(
        &self,
        clusters: impl IntoIterator<Item = (u32, &'a ClusterRec)>,
    ) -> Vec<String> {
        let mut differences = Vec::new();
        for (slot, cluster) in clusters {
            let counted = cluster.counted.as_deref();
            let mut apps: Vec<u32> = self.apps.keys().copied().collect();
            apps.extend(counted.into_iter().flat_map(|c| c.pairs().map(|p| p.app())));
            apps.sort_unstable();
            apps.dedup();
            for app in apps {
                let kept = self
                    .apps
                    .get(&app)
                    .map_or(Standing::Absent, |s| s.get(slot));
                let counted = standing(counted.and_then(|c| c.pair(app)).map(|p| p.state()));
                if kept != counted {
                    differences.push(format!(
                        "slot {slot}, app {app}: kept {kept:?}, counted {counted:?}"
                    ));
                }
            }
            let kept: Keys = self.row(slot).iter().map(|n| self.value(*n)).collect();
            let carried = keys_of(cluster);
            if kept != carried {
                differences.push(format!(
                    "slot {slot}: values kept {kept:?}, carried {carried:?}"
                ));
            }
        }
        differences
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_set_in_any_order_and_length() {
        let mut chunk = RowChunk::default();
        chunk.set(3, &[7, 8]);
        chunk.set(0, &[1]);
        chunk.set(5, &[]);
        chunk.set(3, &[9, 10, 11]);
        chunk.set(0, &[]);
        assert_eq!(chunk.row(0), &[] as &[u32]);
        assert_eq!(chunk.row(1), &[] as &[u32]);
        assert_eq!(chunk.row(3), &[9, 10, 11]);
        assert_eq!(chunk.row(5), &[] as &[u32]);
        assert_eq!(chunk.row(200), &[] as &[u32]);
        chunk.set(4, &[2]);
        assert_eq!(chunk.row(3), &[9, 10, 11]);
        assert_eq!(chunk.row(4), &[2]);
    }

    #[test]
    fn a_slot_stands_where_it_was_last_set() {
        let mut slots = AppSlots::default();
        slots.set(130, Standing::Held(Some(Side::Failing)));
        slots.set(2, Standing::Held(None));
        assert_eq!(slots.get(130), Standing::Held(Some(Side::Failing)));
        assert_eq!(slots.get(2), Standing::Held(None));
        assert_eq!(slots.get(3), Standing::Absent);
        assert_eq!(slots.get(10_000), Standing::Absent);
        slots.set(130, Standing::Held(Some(Side::InSync)));
        assert_eq!(slots.get(130), Standing::Held(Some(Side::InSync)));
        slots.set(130, Standing::Absent);
        assert_eq!(slots.get(130), Standing::Absent);
    }
}
