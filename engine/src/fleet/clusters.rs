//! The cluster map: records in chunks behind shared pointers, so that a snapshot copies one
//! pointer per chunk and a change copies its chunk's pointers only.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::fleet::records::ClusterRec;

/// Records per chunk of [`Clusters`]: a snapshot shares whole chunks, and changing one record
/// copies the pointers of its chunk only.
const CHUNK: usize = 256;

/// The clusters by id: ids in order, each with its record. Cloning shares every record, and
/// costs a pointer per [`CHUNK`] clusters, not one per cluster.
#[derive(Debug, Clone, Default)]
pub struct Clusters {
    slots: Arc<BTreeMap<Arc<str>, u32>>,
    /// Records by slot, [`CHUNK`] to a chunk.
    chunks: Vec<Arc<Vec<Arc<ClusterRec>>>>,
    /// Ids by slot, [`CHUNK`] to a chunk.
    ids: Vec<Arc<Vec<Arc<str>>>>,
    len: usize,
}

fn chunk_of(slot: u32) -> (usize, usize) {
    (slot as usize / CHUNK, slot as usize % CHUNK)
}

impl Clusters {
    pub fn get(&self, id: &str) -> Option<&ClusterRec> {
        self.slots.get(id).map(|slot| self.rec(*slot))
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.slots.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every cluster, by id.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ClusterRec)> + '_ {
        self.slots.iter().map(|(id, slot)| (&**id, self.rec(*slot)))
    }

    /// The clusters from `first` on (included), by id.
    pub fn iter_from<'a>(
        &'a self,
        first: &str,
    ) -> impl Iterator<Item = (&'a str, &'a ClusterRec)> + 'a {
        self.slots
            .range::<str, _>((std::ops::Bound::Included(first), std::ops::Bound::Unbounded))
            .map(|(id, slot)| (&**id, self.rec(*slot)))
    }

    pub fn values(&self) -> impl Iterator<Item = &ClusterRec> + '_ {
        self.iter().map(|(_, c)| c)
    }

    pub(crate) fn slot(&self, id: &str) -> Option<u32> {
        self.slots.get(id).copied()
    }

    /// The slot of `id`, added empty when it is new.
    pub(crate) fn slot_or_add(&mut self, id: &str) -> u32 {
        if let Some(slot) = self.slot(id) {
            return slot;
        }
        let slot = u32::try_from(self.len).expect("fewer than 4 billion clusters");
        let id: Arc<str> = Arc::from(id);
        Arc::make_mut(&mut self.slots).insert(id.clone(), slot);
        let (chunk, _) = chunk_of(slot);
        if chunk == self.chunks.len() {
            self.chunks.push(Arc::new(Vec::with_capacity(CHUNK)));
            self.ids.push(Arc::new(Vec::with_capacity(CHUNK)));
        }
        Arc::make_mut(&mut self.chunks[chunk]).push(Arc::default());
        Arc::make_mut(&mut self.ids[chunk]).push(id);
        self.len += 1;
        slot
    }

    pub(crate) fn rec(&self, slot: u32) -> &ClusterRec {
        let (chunk, at) = chunk_of(slot);
        &self.chunks[chunk][at]
    }

    pub(crate) fn id(&self, slot: u32) -> &Arc<str> {
        let (chunk, at) = chunk_of(slot);
        &self.ids[chunk][at]
    }

    /// Gives back the spare capacity of the cluster's objects (inserting them one by one left
    /// up to half of it unused), where the writer holds the only copy.
    pub(crate) fn trim(&mut self, slot: u32) {
        let (chunk, at) = chunk_of(slot);
        if let Some(objects) = Arc::get_mut(&mut self.chunks[chunk])
            .and_then(|chunk| Arc::get_mut(&mut chunk[at]))
            .and_then(|rec| Arc::get_mut(&mut rec.objects))
        {
            objects.shrink_to_fit();
        }
    }

    pub(crate) fn rec_mut(&mut self, slot: u32) -> &mut ClusterRec {
        let (chunk, at) = chunk_of(slot);
        Arc::make_mut(&mut Arc::make_mut(&mut self.chunks[chunk])[at])
    }
}

impl std::ops::Index<&str> for Clusters {
    type Output = ClusterRec;

    fn index(&self, id: &str) -> &ClusterRec {
        self.get(id).expect("a known cluster")
    }
}
