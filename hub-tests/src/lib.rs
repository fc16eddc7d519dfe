//! The hub's integration tests (`tests/it`) and benchmarks (`benches`): every route over
//! generated fleets in private ClickHouse servers, fleets rendered by the real renderer, the
//! maintained state against counts from scratch, and the answers' latency. The library itself
//! is empty; a crate of its own keeps the test support, the fixtures and the renderer out of
//! the hub's dependencies.
