//! Strings that repeat across the fleet (apps, versions, hashes, messages, names), stored once and
//! referred to by number. One table is shared by every published snapshot of the fleet: it only
//! ever grows, a number once given never changes its text, and reading a text takes no lock, so
//! readers of an old snapshot and the writer adding strings never wait for each other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The first bucket holds `1 << FIRST_BITS` texts; each next one twice as many as the one before.
const FIRST_BITS: u32 = 6;
const BUCKETS: usize = (32 - FIRST_BITS) as usize + 1;

type Bucket = Box<[OnceLock<Arc<str>>]>;

/// The shared, append-only table. [`Symbols`] is the handle the fleet holds.
#[derive(Debug)]
struct Table {
    ids: Mutex<HashMap<Arc<str>, u32>>,
    buckets: [OnceLock<Bucket>; BUCKETS],
}

/// Where number `id` lives: bucket `b` holds the numbers from `(1 << (b + FIRST_BITS)) -
/// (1 << FIRST_BITS)` on.
fn place(id: u32) -> (usize, usize) {
    let shifted = u64::from(id) + (1 << FIRST_BITS);
    let bucket = (63 - shifted.leading_zeros()) - FIRST_BITS;
    let offset = shifted - (1u64 << (bucket + FIRST_BITS));
    (bucket as usize, offset as usize)
}

/// A handle on the shared table; cloning it is cheap and every clone sees the same strings.
#[derive(Debug, Clone)]
pub struct Symbols {
    table: Arc<Table>,
}

impl Default for Symbols {
    fn default() -> Self {
        Symbols {
            table: Arc::new(Table {
                ids: Mutex::new(HashMap::new()),
                buckets: std::array::from_fn(|_| OnceLock::new()),
            }),
        }
    }
}

impl Symbols {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, u32>> {
        self.table
            .ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The number of `text`, given now if it has none yet.
    pub fn intern(&self, text: &str) -> u32 {
        let mut ids = self.ids();
        if let Some(id) = ids.get(text) {
            return *id;
        }
        let id = u32::try_from(ids.len()).expect("fewer than 4 billion distinct strings");
        let shared: Arc<str> = Arc::from(text);
        let (bucket, offset) = place(id);
        let slots = self.table.buckets[bucket].get_or_init(|| {
            (0..1usize << (bucket as u32 + FIRST_BITS))
                .map(|_| OnceLock::new())
                .collect()
        });
        slots[offset]
            .set(shared.clone())
            .expect("a number is given once");
        ids.insert(shared, id);
        id
    }

    /// The text of a number this table gave.
    pub fn text(&self, id: u32) -> &str {
        let (bucket, offset) = place(id);
        self.table.buckets[bucket]
            .get()
            .and_then(|slots| slots[offset].get())
            .expect("a number this table gave")
    }

    pub fn find(&self, text: &str) -> Option<u32> {
        self.ids().get(text).copied()
    }

    pub fn len(&self) -> usize {
        self.ids().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
