//! Normalization of reconciler objects (placeholder until the module lands).
