//! Numbers by cluster number, in chunks behind shared pointers: a snapshot shares every chunk,
//! and a change copies only the chunk it touches (a refresh that moves a few clusters of every
//! app copies a few kilobytes, not every app's numbers).

use std::sync::Arc;

/// Numbers per chunk of [`Chunked`].
const CHUNK: usize = 1024;

/// One number per cluster number; `T::default()` stands for none, and numbers past the end
/// read as it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunked<T> {
    chunks: Vec<Arc<Vec<T>>>,
}

impl<T: Copy + Default + PartialEq> Chunked<T> {
    pub fn get(&self, at: usize) -> T {
        self.chunks
            .get(at / CHUNK)
            .map_or_else(T::default, |chunk| chunk[at % CHUNK])
    }

    pub fn set(&mut self, at: usize, value: T) {
        if self.get(at) == value {
            return;
        }
        let chunk = at / CHUNK;
        if chunk >= self.chunks.len() {
            self.chunks
                .resize_with(chunk + 1, || Arc::new(vec![T::default(); CHUNK]));
        }
        Arc::make_mut(&mut self.chunks[chunk])[at % CHUNK] = value;
    }

    /// The cluster numbers whose number differs from `before`'s, in order: chunks both share
    /// are passed over without reading them.
    pub fn changed_since<'a>(&'a self, before: &'a Chunked<T>) -> impl Iterator<Item = usize> + 'a {
        let chunks = self.chunks.len().max(before.chunks.len());
        (0..chunks).flat_map(move |c| {
            let (now, then) = (self.chunks.get(c), before.chunks.get(c));
            let shared = matches!((now, then), (Some(a), Some(b)) if Arc::ptr_eq(a, b));
            let numbers = if shared {
                0..0
            } else {
                c * CHUNK..(c + 1) * CHUNK
            };
            numbers.filter(move |&at| self.get(at) != before.get(at))
        })
    }

    /// Every number that is not none, with its cluster number.
    pub fn iter(&self) -> impl Iterator<Item = (usize, T)> + '_ {
        self.chunks.iter().enumerate().flat_map(|(c, chunk)| {
            chunk
                .iter()
                .enumerate()
                .filter(|(_, v)| **v != T::default())
                .map(move |(i, v)| (c * CHUNK + i, *v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_copies_only_its_chunk_and_none_reads_as_default() {
        let mut a: Chunked<u32> = Chunked::default();
        a.set(5, 7);
        a.set(3 * CHUNK + 1, 9);
        assert_eq!(
            (a.get(5), a.get(6), a.get(3 * CHUNK + 1), a.get(99 * CHUNK)),
            (7, 0, 9, 0)
        );
        let snapshot = a.clone();
        a.set(6, 8);
        assert_eq!((snapshot.get(6), a.get(6)), (0, 8));
        assert!(
            Arc::ptr_eq(&snapshot.chunks[3], &a.chunks[3]),
            "an untouched chunk is shared"
        );
        assert!(!Arc::ptr_eq(&snapshot.chunks[0], &a.chunks[0]));
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![(5, 7), (6, 8), (3 * CHUNK + 1, 9)]
        );
        a.set(5 * CHUNK, 1);
        a.set(3 * CHUNK + 1, 0);
        assert_eq!(
            a.changed_since(&snapshot).collect::<Vec<_>>(),
            vec![6, 3 * CHUNK + 1, 5 * CHUNK]
        );
        assert_eq!(
            snapshot.changed_since(&a).collect::<Vec<_>>(),
            vec![6, 3 * CHUNK + 1, 5 * CHUNK],
            "either way round, chunks past the other's end included"
        );
        assert_eq!(a.changed_since(&a.clone()).count(), 0);
    }
}
