//! Counters kept current as the fleet changes: for every group at every level (and the whole
//! fleet), per environment and for all environments together, the clusters, the stale ones, the
//! pairs per drift state, and per app the pairs per state and the clusters per desired and per
//! running version. A cluster adds what it is counted as ([`Counted`]) to the cells of its group's
//! prefixes; when it changes, only the pairs that differ are taken out and added again
//! ([`replace`]), so a change costs the depth of its group times the pairs that changed, never
//! the fleet.

use std::collections::HashMap;
use std::sync::Arc;

use fleetscope_model::DriftState;
use smallvec::SmallVec;

use crate::counts::{state_index, Counts};

/// The environment key of the cells that count every environment together.
pub const ANY_ENVIRONMENT: u32 = u32::MAX;

/// One pair as counted: its app, state and the versions desired and running (symbols). 12
/// bytes: a fleet holds one per pair. The state sits in the top three bits of the app's symbol
/// (symbols stay far below 2^29: each is a string the hub holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountedPair {
    app_state: u32,
    desired_version: u32,
    observed_version: u32,
}

/// The symbol number that stands for "no version" in a [`CountedPair`].
const NO_VERSION: u32 = u32::MAX;

/// Bits of [`CountedPair::app_state`] below the state's.
const STATE_SHIFT: u32 = 29;

impl CountedPair {
    pub fn new(
        app: u32,
        state: DriftState,
        desired_version: Option<u32>,
        observed_version: Option<u32>,
    ) -> CountedPair {
        assert!(app < 1 << STATE_SHIFT, "fewer than 2^29 symbols");
        let state = u32::try_from(state_index(state)).expect("eight states");
        CountedPair {
            app_state: app | (state << STATE_SHIFT),
            desired_version: desired_version.unwrap_or(NO_VERSION),
            observed_version: observed_version.unwrap_or(NO_VERSION),
        }
    }

    pub fn app(&self) -> u32 {
        self.app_state & ((1 << STATE_SHIFT) - 1)
    }

    pub fn state(&self) -> DriftState {
        DriftState::ALL[(self.app_state >> STATE_SHIFT) as usize]
    }

    pub fn desired_version(&self) -> Option<u32> {
        (self.desired_version != NO_VERSION).then_some(self.desired_version)
    }

    pub fn observed_version(&self) -> Option<u32> {
        (self.observed_version != NO_VERSION).then_some(self.observed_version)
    }
}

/// Pairs to a chunk of a [`Counted`] (the last chunk may hold fewer). A full chunk and the
/// `Arc`'s counts take 16 + 36 × 12 = 448 bytes, one of the allocator's size classes.
const PAIR_CHUNK: usize = 36;

/// What one inventory cluster adds to the counters: its group's prefixes (the fleet's symbol
/// first), its environment, whether it is stale, and its pairs sorted by app symbol.
///
/// The pairs are kept in chunks of [`PAIR_CHUNK`], each its own `Arc`, and a cluster counted
/// again shares every chunk (and its prefixes) that did not change with what it counted as
/// before ([`Counted::new`]): a rollout recounts every cluster at once, and while the published
/// snapshot holds the old records a whole copy of each cluster's pairs made the memory peak.
/// The first [`INLINE_CHUNKS`] chunks' pointers are held in the record itself: a pass over the
/// fleet for one app reads a cluster's record and then the chunk, with no list between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub prefixes: Arc<[u32]>,
    pub environment: u32,
    pub stale: bool,
    chunks: SmallVec<[Arc<[CountedPair]>; INLINE_CHUNKS]>,
}

/// Chunks whose pointers a [`Counted`] holds in itself: a cluster of up to 108 apps.
const INLINE_CHUNKS: usize = 3;

impl Counted {
    /// What a cluster counts as, with `pairs` sorted by app symbol. Prefixes and chunks of
    /// pairs equal to those of `before` (what the cluster counted as until now) are shared
    /// with it rather than held twice.
    pub fn new(
        prefixes: Vec<u32>,
        environment: u32,
        stale: bool,
        pairs: Vec<CountedPair>,
        before: Option<&Counted>,
    ) -> Counted {
        debug_assert!(pairs.windows(2).all(|w| w[0].app() < w[1].app()));
        let prefixes = match before {
            Some(b) if *b.prefixes == *prefixes => b.prefixes.clone(),
            _ => Arc::from(prefixes),
        };
        let chunks = pairs
            .chunks(PAIR_CHUNK)
            .enumerate()
            .map(|(i, chunk)| match before.and_then(|b| b.chunks.get(i)) {
                Some(held) if **held == *chunk => held.clone(),
                _ => Arc::from(chunk),
            })
            .collect();
        Counted {
            prefixes,
            environment,
            stale,
            chunks,
        }
    }

    /// Its pairs, by app symbol.
    pub fn pairs(&self) -> impl Iterator<Item = &CountedPair> + '_ {
        self.chunks.iter().flat_map(|chunk| chunk.iter())
    }

    /// The maintained pair of `app`, if the cluster has one.
    pub fn pair(&self, app: u32) -> Option<&CountedPair> {
        self.find(app).map(|(pair, _)| pair)
    }

    /// [`Counted::pair`], looked for first where `hint` says the last cluster held it, and
    /// `hint` moved to where it was found. Clusters mostly hold the same apps, so a pass over
    /// the fleet for one app finds it there nearly every time and reads one chunk, not the
    /// three or four of a search (each a cache miss on a fleet this size).
    pub fn pair_near(&self, app: u32, hint: &mut PairHint) -> Option<&CountedPair> {
        let hinted = self
            .chunks
            .get(hint.chunk)
            .and_then(|chunk| chunk.get(hint.at))
            .filter(|pair| pair.app() == app);
        if hinted.is_some() {
            return hinted;
        }
        let (pair, found) = self.find(app)?;
        *hint = found;
        Some(pair)
    }

    fn find(&self, app: u32) -> Option<(&CountedPair, PairHint)> {
        let chunk = chunk_holding(&self.chunks, app, |p| p.app());
        let pairs = self.chunks.get(chunk)?;
        let at = pairs.binary_search_by_key(&app, |p| p.app()).ok()?;
        Some((&pairs[at], PairHint { chunk, at }))
    }
}

/// Where [`Counted::pair_near`] last found an app's pair: its chunk and its place there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PairHint {
    chunk: usize,
    at: usize,
}

/// Which of `chunks` (sorted by `key`, none empty) holds `key`, or would: the last whose
/// first entry is not after it, or the first.
fn chunk_holding<T>(chunks: &[Arc<[T]>], key: u32, key_of: impl Fn(&T) -> u32) -> usize {
    chunks
        .partition_point(|chunk| key_of(&chunk[0]) <= key)
        .saturating_sub(1)
}

/// Per app within a cell: 32-bit counters (a cell counts fewer than 4 billion clusters) and
/// one list for both version counts, held inline up to two versions (an app whose clusters
/// desire and run one version, or are between two), so that most entries allocate nothing and
/// copying a cell copies one block. 64 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppCell {
    /// Pairs per drift state, in `DriftState::ALL` order.
    pairs: [u32; 8],
    /// Per version symbol, sorted by symbol: the clusters that desire it and those that run
    /// it. No entry has both at zero.
    versions: SmallVec<[VersionCount; 2]>,
}

/// Which clusters of a version a count is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The clusters whose desired version it is.
    Desired,
    /// The clusters that run it.
    Running,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct VersionCount {
    version: u32,
    desired: u32,
    running: u32,
}

impl AppCell {
    /// Pairs per drift state, in `DriftState::ALL` order.
    pub fn pairs(&self) -> [u64; 8] {
        self.pairs.map(u64::from)
    }

    /// Version symbol → clusters that desire it (or run it), sorted by symbol; no zero
    /// entries.
    pub fn versions(&self, side: Side) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.versions.iter().filter_map(move |v| {
            let n = match side {
                Side::Desired => v.desired,
                Side::Running => v.running,
            };
            (n > 0).then_some((v.version, u64::from(n)))
        })
    }

    fn is_empty(&self) -> bool {
        self.pairs.iter().all(|n| *n == 0) && self.versions.is_empty()
    }
}

/// Most app entries a chunk of a [`Cell`] holds; one that grows past it is split in two. A
/// full chunk and the `Arc`'s counts take 16 + 14 × 72 = 1,024 bytes, one of the allocator's
/// size classes.
const CELL_CHUNK: usize = 14;

const _: () = assert!(size_of::<(u32, AppCell)>() == 72);

/// One (group prefix, environment) cell: its counts, and its apps' entries sorted by app
/// symbol, in chunks of at most [`CELL_CHUNK`] (none empty), each its own `Arc`. A cell that a
/// published snapshot shares is copied when it changes next, but only its list of chunks and
/// the chunk that holds the changed app: a rollout of one app changes every cell at once, and
/// copying whole cells (a hundred apps: about 7 KB each) made the hub's memory peak then.
#[derive(Debug, Clone, Default)]
pub struct Cell {
    pub counts: Counts,
    chunks: Vec<Arc<[(u32, AppCell)]>>,
}

/// Cells are equal when they count the same, however their entries are chunked.
impl PartialEq for Cell {
    fn eq(&self, other: &Cell) -> bool {
        self.counts == other.counts && self.apps().eq(other.apps())
    }
}

impl Eq for Cell {}

impl Cell {
    /// The entry of `app`, if any pair of it is counted here.
    pub fn app(&self, app: u32) -> Option<&AppCell> {
        let chunk = self.chunks.get(chunk_holding(&self.chunks, app, |e| e.0))?;
        chunk
            .binary_search_by_key(&app, |(a, _)| *a)
            .ok()
            .map(|at| &chunk[at].1)
    }

    /// Every app with a counted pair, by symbol.
    pub fn apps(&self) -> impl Iterator<Item = (u32, &AppCell)> + '_ {
        self.chunks
            .iter()
            .flat_map(|chunk| chunk.iter().map(|(a, c)| (*a, c)))
    }

    /// Changes the entry of `app` by `f` (made empty first when there is none); an entry left
    /// empty is removed, and a chunk grown past [`CELL_CHUNK`] split in two. A chunk is an
    /// exact-size slice: a change to an entry copies it only when a snapshot shares it, and
    /// adding or removing an entry (an app coming into or leaving the cell, which is rare)
    /// makes it anew.
    fn change_app(&mut self, app: u32, f: impl FnOnce(&mut AppCell)) {
        let c = chunk_holding(&self.chunks, app, |e| e.0);
        let held: &[(u32, AppCell)] = self.chunks.get(c).map_or(&[], |chunk| chunk);
        match held.binary_search_by_key(&app, |(a, _)| *a) {
            Ok(at) => {
                let chunk = Arc::make_mut(&mut self.chunks[c]);
                f(&mut chunk[at].1);
                if chunk[at].1.is_empty() {
                    if chunk.len() == 1 {
                        self.chunks.remove(c);
                    } else {
                        let mut entries = chunk.to_vec();
                        entries.remove(at);
                        self.chunks[c] = Arc::from(entries);
                    }
                }
            }
            Err(at) => {
                let mut entry = AppCell::default();
                f(&mut entry);
                if entry.is_empty() {
                    return;
                }
                let mut entries = Vec::with_capacity(held.len() + 1);
                entries.extend_from_slice(&held[..at]);
                entries.push((app, entry));
                entries.extend_from_slice(&held[at..]);
                if self.chunks.is_empty() {
                    self.chunks.push(Arc::from(entries));
                } else if entries.len() <= CELL_CHUNK {
                    self.chunks[c] = Arc::from(entries);
                } else {
                    // Apps mostly arrive in symbol order (interned as first seen): one added
                    // after the last leaves the full chunk as it is and starts the next, so
                    // that chunks stay full; elsewhere a chunk is cut in halves.
                    let last = c + 1 == self.chunks.len() && at + 1 == entries.len();
                    let cut = if last { CELL_CHUNK } else { entries.len() / 2 };
                    self.chunks[c] = Arc::from(&entries[..cut]);
                    self.chunks.insert(c + 1, Arc::from(&entries[cut..]));
                }
            }
        }
    }
}

/// Every cell, keyed by (prefix symbol, environment symbol or [`ANY_ENVIRONMENT`]). A cell is
/// there while it counts at least one cluster. Where every cluster of a prefix is in one
/// environment, the cell of all environments is the same `Arc` as that environment's (see
/// [`share_when_equal`]).
pub type Cells = HashMap<(u32, u32), Arc<Cell>>;

fn bump(n: &mut u64, add: bool) {
    if add {
        *n += 1;
    } else {
        *n = n.checked_sub(1).expect("a count never goes below zero");
    }
}

fn bump32(n: &mut u32, add: bool) {
    if add {
        *n = n
            .checked_add(1)
            .expect("fewer than 4 billion clusters in a cell");
    } else {
        *n = n.checked_sub(1).expect("a count never goes below zero");
    }
}

/// Where `version`'s entry is, made at zero when there is none.
fn version_at(versions: &mut SmallVec<[VersionCount; 2]>, version: u32) -> usize {
    versions
        .binary_search_by_key(&version, |v| v.version)
        .unwrap_or_else(|at| {
            versions.insert(
                at,
                VersionCount {
                    version,
                    desired: 0,
                    running: 0,
                },
            );
            at
        })
}

/// Counts a cluster desiring or running `version` in or out.
fn bump_version(versions: &mut SmallVec<[VersionCount; 2]>, version: u32, side: Side, add: bool) {
    let at = version_at(versions, version);
    let entry = &mut versions[at];
    bump32(
        match side {
            Side::Desired => &mut entry.desired,
            Side::Running => &mut entry.running,
        },
        add,
    );
    if entry.desired == 0 && entry.running == 0 {
        versions.remove(at);
    }
}

/// Counts one pair in (`add`) or out of a cell.
fn count_pair(cell: &mut Cell, pair: &CountedPair, add: bool) {
    count_pairs(cell, &[(pair, add)]);
}

/// Counts pairs of one app in (`true`) or out of a cell: all in one change of the app's
/// entry, those taken out first, so that an entry whose pair changed is never emptied and made
/// again in between (which could move it to the chunk before and copy two chunks).
fn count_pairs(cell: &mut Cell, changes: &[(&CountedPair, bool)]) {
    let Some((first, _)) = changes.first() else {
        return;
    };
    debug_assert!(changes.iter().all(|(p, _)| p.app() == first.app()));
    for (pair, add) in changes {
        bump(&mut cell.counts.pairs[state_index(pair.state())], *add);
    }
    cell.change_app(first.app(), |app| {
        for add in [false, true] {
            for (pair, _) in changes.iter().filter(|(_, a)| *a == add) {
                count_in_app(app, pair, add);
            }
        }
    });
}

/// Counts one pair in (`add`) or out of its app's entry: its state and its versions.
fn count_in_app(app: &mut AppCell, pair: &CountedPair, add: bool) {
    bump32(&mut app.pairs[state_index(pair.state())], add);
    if let Some(v) = pair.desired_version() {
        bump_version(&mut app.versions, v, Side::Desired, add);
    }
    if let Some(v) = pair.observed_version() {
        bump_version(&mut app.versions, v, Side::Running, add);
    }
}

/// Makes the cell of all environments of `prefix` the same `Arc` as the cell of `environment`
/// when both count the same clusters. The cell of all environments counts a superset of any
/// one environment's clusters, so equal cluster counts mean equal cells: most small groups
/// have a single environment, and this halves what their cells hold. A change to either copies
/// it first (`Arc::make_mut`), so sharing never lets one change the other.
fn share_when_equal(cells: &mut Cells, prefix: u32, environment: u32) {
    if environment == ANY_ENVIRONMENT {
        return;
    }
    let Some(one) = cells.get(&(prefix, environment)) else {
        return;
    };
    let Some(all) = cells.get(&(prefix, ANY_ENVIRONMENT)) else {
        return;
    };
    if !Arc::ptr_eq(one, all) && one.counts.clusters == all.counts.clusters {
        debug_assert!(**one == **all, "equal cluster counts, equal cells");
        let one = one.clone();
        cells.insert((prefix, ANY_ENVIRONMENT), one);
    }
}

/// Adds (`add`) or takes out what `counted` contributes to every cell it belongs to.
pub fn apply(cells: &mut Cells, counted: &Counted, add: bool) {
    for prefix in counted.prefixes.iter() {
        update(cells, *prefix, counted.environment, |cell| {
            bump(&mut cell.counts.clusters, add);
            if counted.stale {
                bump(&mut cell.counts.stale_clusters, add);
            }
            for pair in counted.pairs() {
                count_pair(cell, pair, add);
            }
        });
    }
}

/// Applies `f` to the cell of `prefix` in `environment` and to its cell of all environments,
/// each made first when missing and removed when it counts no cluster after. Where the two
/// are one shared `Arc`, `f` runs once and both keys get the result; afterwards they are
/// shared again if they count the same clusters (see [`share_when_equal`]).
fn update(cells: &mut Cells, prefix: u32, environment: u32, mut f: impl FnMut(&mut Cell)) {
    let one = (prefix, environment);
    let all = (prefix, ANY_ENVIRONMENT);
    let shared = match (cells.get(&one), cells.get(&all)) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    };
    if shared {
        // Dropped first, so that the cell is changed in place when no snapshot holds it.
        cells.remove(&all);
    }
    for key in [one, all] {
        if shared && key == all {
            if let Some(cell) = cells.get(&one).cloned() {
                cells.insert(all, cell);
            }
            continue;
        }
        let cell = Arc::make_mut(cells.entry(key).or_default());
        f(cell);
        if cell.counts.clusters == 0 {
            debug_assert!(cell.chunks.is_empty() && cell.counts == Counts::default());
            cells.remove(&key);
        }
    }
    share_when_equal(cells, prefix, environment);
}

/// Replaces what a cluster counted as (`old`) by what it counts as now (`new`). A cluster that
/// stayed in its group and environment has only the pairs that changed counted again, in the
/// cells of its prefixes; one that moved is taken out whole and added whole.
pub fn replace(cells: &mut Cells, old: Option<&Counted>, new: Option<&Counted>) {
    let (old, new) = match (old, new) {
        (Some(old), Some(new))
            if old.prefixes == new.prefixes && old.environment == new.environment =>
        {
            (old, new)
        }
        (old, new) => {
            if let Some(old) = old {
                apply(cells, old, false);
            }
            if let Some(new) = new {
                apply(cells, new, true);
            }
            return;
        }
    };
    let changes = changed_pairs(old, new);
    if changes.is_empty() && old.stale == new.stale {
        return;
    }
    for prefix in new.prefixes.iter() {
        debug_assert!(
            cells.contains_key(&(*prefix, new.environment))
                && cells.contains_key(&(*prefix, ANY_ENVIRONMENT)),
            "a counted cluster's cells are there"
        );
        update(cells, *prefix, new.environment, |cell| {
            if old.stale != new.stale {
                bump(&mut cell.counts.stale_clusters, new.stale);
            }
            for app in changes.chunk_by(|a, b| a.0.app() == b.0.app()) {
                count_pairs(cell, app);
            }
        });
    }
}

/// The pairs to take out (`false`) and to add (`true`) to go from `old` to `new`; pairs equal
/// in both are left alone.
fn changed_pairs<'a>(old: &'a Counted, new: &'a Counted) -> Vec<(&'a CountedPair, bool)> {
    let mut changes = Vec::new();
    let mut old = old.pairs().peekable();
    let mut new = new.pairs().peekable();
    loop {
        match (old.peek(), new.peek()) {
            (Some(o), Some(n)) if o.app() == n.app() => {
                if o != n {
                    changes.push((*o, false));
                    changes.push((*n, true));
                }
                old.next();
                new.next();
            }
            (Some(o), Some(n)) if o.app() < n.app() => {
                changes.push((*o, false));
                old.next();
            }
            (Some(o), None) => {
                changes.push((*o, false));
                old.next();
            }
            (_, Some(n)) => {
                changes.push((*n, true));
                new.next();
            }
            (None, None) => break,
        }
    }
    changes
}

/// The cells a set of counted clusters makes, computed from scratch: what [`apply`] must keep.
pub fn from_scratch<'a>(counted: impl IntoIterator<Item = &'a Counted>) -> Cells {
    let mut cells = Cells::new();
    for c in counted {
        apply(&mut cells, c, true);
    }
    cells
}

/// A cell's counts while the cells are built at once ([`build`]): its apps' entries in one
/// sorted list.
#[derive(Debug, Default)]
struct Tally {
    counts: Counts,
    apps: Vec<(u32, AppCell)>,
}

impl Tally {
    /// Counts one cluster in: `pairs` sorted by app, as are the entries, so one walk over both
    /// finds every entry (a group's clusters mostly have the same apps: an entry is rarely
    /// inserted).
    fn count_in(&mut self, counted: &Counted) {
        self.counts.clusters += 1;
        if counted.stale {
            self.counts.stale_clusters += 1;
        }
        let mut at = 0;
        for pair in counted.pairs() {
            at = self.entry_from(at, pair.app());
            self.counts.pairs[state_index(pair.state())] += 1;
            count_in_app(&mut self.apps[at].1, pair, true);
            at += 1;
        }
    }

    /// Where the entry of `app` is, looking from `from` on (the entries before it are of
    /// smaller apps); made empty when there is none.
    fn entry_from(&mut self, from: usize, app: u32) -> usize {
        let mut at = from;
        while self.apps.get(at).is_some_and(|(a, _)| *a < app) {
            at += 1;
        }
        if self.apps.get(at).is_none_or(|(a, _)| *a != app) {
            self.apps.insert(at, (app, AppCell::default()));
        }
        at
    }

    /// Adds what `other` counts.
    fn add(&mut self, other: &Tally) {
        self.counts.clusters += other.counts.clusters;
        self.counts.stale_clusters += other.counts.stale_clusters;
        for (mine, theirs) in self.counts.pairs.iter_mut().zip(other.counts.pairs) {
            *mine += theirs;
        }
        let mut at = 0;
        for (app, cell) in &other.apps {
            at = self.entry_from(at, *app);
            let entry = &mut self.apps[at].1;
            for (mine, theirs) in entry.pairs.iter_mut().zip(cell.pairs) {
                *mine = mine
                    .checked_add(theirs)
                    .expect("fewer than 4 billion clusters in a cell");
            }
            for v in &cell.versions {
                let i = version_at(&mut entry.versions, v.version);
                let e = &mut entry.versions[i];
                e.desired = e
                    .desired
                    .checked_add(v.desired)
                    .expect("fewer than 4 billion clusters in a cell");
                e.running = e
                    .running
                    .checked_add(v.running)
                    .expect("fewer than 4 billion clusters in a cell");
            }
            at += 1;
        }
    }

    fn into_cell(self) -> Cell {
        Cell {
            counts: self.counts,
            chunks: self.apps.chunks(CELL_CHUNK).map(Arc::from).collect(),
        }
    }
}

/// The cells a set of counted clusters makes, built at once: equal to [`from_scratch`] (and
/// to counting them in one by one, the same cells shared between an environment and all
/// environments), for a fleet counted from nothing (the index's first load, a fleet at a past
/// moment). [`apply`] counts each cluster into every cell of its prefixes (a group's depth
/// times two, a hundred apps each); here each cluster is counted once, into the tally of its
/// group and environment, and each group's tally is then added to its prefixes' cells.
pub fn build<'a>(counted: impl IntoIterator<Item = &'a Counted>) -> Cells {
    let mut groups: HashMap<(&'a [u32], u32), Tally> = HashMap::new();
    for c in counted {
        groups
            .entry((&c.prefixes[..], c.environment))
            .or_default()
            .count_in(c);
    }
    let mut tallies: HashMap<(u32, u32), Tally> = HashMap::new();
    for ((prefixes, environment), tally) in &groups {
        for prefix in prefixes.iter() {
            for key in [(*prefix, *environment), (*prefix, ANY_ENVIRONMENT)] {
                tallies.entry(key).or_default().add(tally);
            }
        }
    }
    let mut cells: Cells = tallies
        .into_iter()
        .map(|(key, tally)| (key, Arc::new(tally.into_cell())))
        .collect();
    let one_environment: Vec<(u32, u32)> = cells
        .iter()
        .filter(|((prefix, environment), one)| {
            *environment != ANY_ENVIRONMENT
                && cells
                    .get(&(*prefix, ANY_ENVIRONMENT))
                    .is_some_and(|all| all.counts.clusters == one.counts.clusters)
        })
        .map(|(key, _)| *key)
        .collect();
    for (prefix, environment) in one_environment {
        let one = cells[&(prefix, environment)].clone();
        cells.insert((prefix, ANY_ENVIRONMENT), one);
    }
    cells
}

#[cfg(test)]
mod tests;
