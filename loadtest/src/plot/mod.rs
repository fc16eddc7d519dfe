//! PNG charts for the load test's report: line charts over time and latency CDFs. Drawn with
//! `plotters` into memory, encoded with `png`; text uses the embedded Noto Sans font, so no
//! system font library is needed.

mod axes;
mod canvas;
mod cdf;
mod line;
mod over_time;
mod stats;
#[cfg(test)]
mod tests;

pub use canvas::SIZE;
pub use cdf::latency_cdf;
pub use line::{line_chart, Series};
pub use over_time::{band_windows, samples_over_time, YScale, BAND_WINDOWS, MAX_POINTS};
