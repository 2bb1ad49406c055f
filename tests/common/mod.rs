//! Helpers shared by integration tests (each test binary includes what it uses).

pub mod dynamic;
