//! Strings that repeat across the fleet (apps, versions, hashes, messages, names), stored once and
//! referred to by number. One table is shared by every published snapshot of the fleet: it only
//! ever grows, a number once given never changes its text, and reading a text takes no lock, so
//! readers of an old snapshot and the writer adding strings never wait for each other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The first bucket holds `1 << FIRST_BITS` texts; each next one twice as many as the one before.
const FIRST_BITS: u32 = 6;
const BUCKETS: usize = (32 - FIRST_BITS) as usize + 1;

type Bucket<T> = Box<[OnceLock<T>]>;

/// An append-only table of values by number, shared by every handle cloned from it: a value
/// once given a number keeps it, and reading one takes no lock. [`Symbols`] is the one for
/// strings; the hub keeps others for values made of symbols that repeat across the fleet.
#[derive(Debug)]
pub struct Interner<T> {
    table: Arc<Table<T>>,
}

#[derive(Debug)]
struct Table<T> {
    ids: Mutex<HashMap<T, u32>>,
    buckets: [OnceLock<Bucket<T>>; BUCKETS],
}

impl<T> Clone for Interner<T> {
    fn clone(&self) -> Self {
        Interner {
            table: self.table.clone(),
        }
    }
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            table: Arc::new(Table {
                ids: Mutex::new(HashMap::new()),
                buckets: std::array::from_fn(|_| OnceLock::new()),
            }),
        }
    }
}

/// Where number `id` lives: bucket `b` holds the numbers from `(1 << (b + FIRST_BITS)) -
/// (1 << FIRST_BITS)` on.
fn place(id: u32) -> (usize, usize) {
    let shifted = u64::from(id) + (1 << FIRST_BITS);
    let bucket = (63 - shifted.leading_zeros()) - FIRST_BITS;
    let offset = shifted - (1u64 << (bucket + FIRST_BITS));
    (bucket as usize, offset as usize)
}

impl<T: std::hash::Hash + Eq + Clone> Interner<T> {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<T, u32>> {
        self.table
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The number of `value`, given now if it has none yet.
    pub fn intern(&self, value: T) -> u32 {
        self.intern_with(&value.clone(), || value)
    }

    /// The number of the value `key` borrows as, given now (to the value `make` builds) if it
    /// has none yet: a borrowed string is copied only when it is new.
    pub fn intern_with<Q>(&self, key: &Q, make: impl FnOnce() -> T) -> u32
    where
        T: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        let mut ids = self.ids();
        if let Some(id) = ids.get(key) {
            return *id;
        }
        let id = u32::try_from(ids.len()).expect("fewer than 4 billion distinct values");
        let owned = make();
        let (bucket, offset) = place(id);
        let slots = self.table.buckets[bucket].get_or_init(|| {
            (0..1usize << (bucket as u32 + FIRST_BITS))
                .map(|_| OnceLock::new())
                .collect()
        });
        if slots[offset].set(owned.clone()).is_err() {
            unreachable!("a number is given once");
        }
        ids.insert(owned, id);
        id
    }

    /// The value of a number this table gave.
    pub fn get(&self, id: u32) -> &T {
        let (bucket, offset) = place(id);
        self.table.buckets[bucket]
            .get()
            .and_then(|slots| slots[offset].get())
            .expect("a number this table gave")
    }

    /// The number of `value`, if it has one.
    pub fn find<Q>(&self, value: &Q) -> Option<u32>
    where
        T: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        self.ids().get(value).copied()
    }

    pub fn len(&self) -> usize {
        self.ids().len()
    }

    /// Which table this handle shares (equal for every clone).
    fn table_id(&self) -> usize {
        Arc::as_ptr(&self.table) as *const () as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The strings of the fleet; cloning the handle is cheap and every clone sees the same strings.
#[derive(Debug, Clone, Default)]
pub struct Symbols {
    table: Interner<Arc<str>>,
}

impl Symbols {
    /// The number of `text`, given now if it has none yet.
    pub fn intern(&self, text: &str) -> u32 {
        self.table.intern_with(text, || Arc::from(text))
    }

    /// The text of a number this table gave.
    pub fn text(&self, id: u32) -> &str {
        self.table.get(id)
    }

    pub fn find(&self, text: &str) -> Option<u32> {
        self.table.find(text)
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// How many texts an [`InternMemo`] remembers (a power of two).
const MEMO_SLOTS: usize = 1 << 12;

/// A small cache in front of [`Symbols::intern`] for a long run of interning (a bulk read of
/// millions of rows whose texts repeat): a quick hash of the text picks one slot, and a slot
/// that holds the same text gives its number without the table's lock and keyed hash. Two
/// texts on one slot only send the second to the table, so texts from outside cannot make
/// interning slower than the table alone. It follows one table: handed another, it forgets
/// what it held.
#[derive(Debug)]
pub struct InternMemo {
    table: usize,
    /// (hash, number + 1); 0 is an empty slot.
    slots: Box<[(u64, u32)]>,
}

impl Default for InternMemo {
    fn default() -> Self {
        InternMemo {
            table: 0,
            slots: vec![(0, 0); MEMO_SLOTS].into_boxed_slice(),
        }
    }
}

impl InternMemo {
    /// The number of `text` in `symbols`, given now if it has none yet.
    pub fn intern(&mut self, symbols: &Symbols, text: &str) -> u32 {
        let table = symbols.table.table_id();
        if self.table != table {
            self.slots.fill((0, 0));
            self.table = table;
        }
        let hash = quick_hash(text.as_bytes());
        let slot = &mut self.slots[(hash as usize) & (MEMO_SLOTS - 1)];
        if slot.1 != 0 && slot.0 == hash && symbols.text(slot.1 - 1) == text {
            return slot.1 - 1;
        }
        let id = symbols.intern(text);
        if let Some(stored) = id.checked_add(1) {
            *slot = (hash, stored);
        }
        id
    }
}

/// A fast, unkeyed hash of a few dozen bytes (a word at a time, multiply and rotate): good
/// enough to spread texts over the memo's slots, which check the text itself.
fn quick_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut hash = bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        hash = (hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        hash = (hash.rotate_left(5) ^ u64::from_le_bytes(last)).wrapping_mul(K);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_cover_every_bucket_edge_and_keep_their_text() {
        let symbols = Symbols::default();
        let texts: Vec<String> = (0..5_000).map(|i| format!("text-{i}")).collect();
        for (i, text) in texts.iter().enumerate() {
            assert_eq!(symbols.intern(text) as usize, i);
        }
        // Asked again: the same number.
        assert_eq!(symbols.intern("text-63"), 63);
        assert_eq!(symbols.intern("text-64"), 64);
        for (i, text) in texts.iter().enumerate() {
            assert_eq!(symbols.text(i as u32), text);
            assert_eq!(symbols.find(text), Some(i as u32));
        }
        assert_eq!(symbols.len(), 5_000);
        assert_eq!(symbols.find("never"), None);
        // A clone is the same table.
        let other = symbols.clone();
        let id = other.intern("added later");
        assert_eq!(symbols.text(id), "added later");
    }

    #[test]
    fn the_memo_gives_the_tables_numbers_and_follows_one_table() {
        let symbols = Symbols::default();
        let mut memo = InternMemo::default();
        // More texts than slots, asked twice in different orders: every number is the table's.
        let texts: Vec<String> = (0..3 * MEMO_SLOTS).map(|i| format!("v{i}")).collect();
        for text in texts.iter().chain(texts.iter().rev()) {
            assert_eq!(memo.intern(&symbols, text), symbols.intern(text), "{text}");
        }
        assert_eq!(symbols.len(), texts.len());
        assert_eq!(memo.intern(&symbols, ""), symbols.intern(""));
        // Another table: the memo does not answer from the first one.
        let other = Symbols::default();
        other.intern("first");
        let id = memo.intern(&other, "v100");
        assert_eq!(other.text(id), "v100");
        assert_eq!(id, 1);
    }

    #[test]
    fn places_are_contiguous() {
        let mut expected = (0usize, 0usize);
        for id in 0..100_000u32 {
            let at = place(id);
            assert_eq!(at, expected, "{id}");
            let size = 1usize << (expected.0 as u32 + FIRST_BITS);
            expected = if expected.1 + 1 == size {
                (expected.0 + 1, 0)
            } else {
                (expected.0, expected.1 + 1)
            };
        }
        assert_eq!(place(u32::MAX).0, BUCKETS - 1);
    }
}
