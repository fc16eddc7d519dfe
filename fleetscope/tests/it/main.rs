//! The `fleetscope` binary's tests, one program: its command line, the fault tests of the real
//! services and TLS. Each starts the binary (and the servers it needs) as child processes. The
//! tests that need the binary's development tools are the `dev_tools` program.

mod cli;
mod collector_crash;
mod existing_fleet;
mod faults;
mod guide;
mod tls;
