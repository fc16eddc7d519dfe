//! Latency distributions: one cumulative distribution per sample set on a log-scaled latency
//! axis, with each set's p50, p95 and p99 in its legend label.

use std::path::Path;

use plotters::prelude::*;

use super::axes::{legend, mesh, no_data, sig, title_style, PALETTE};
use super::canvas::render;
use super::stats::{bounds, percentile};

/// Latency distributions: one cumulative distribution per named sample set (milliseconds), x on
/// a log scale, y the percentile; p50/p95/p99 in each legend label. NaN and infinite values are
/// skipped; values at or below zero are drawn at the axis' left edge.
pub fn latency_cdf(path: &Path, title: &str, samples: &[(String, Vec<f64>)]) -> anyhow::Result<()> {
    let sets: Vec<(&str, Vec<f64>)> = samples
        .iter()
        .map(|(name, values)| {
            let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
            v.sort_by(f64::total_cmp);
            (name.as_str(), v)
        })
        .collect();
    let all = || sets.iter().flat_map(|(_, v)| v.iter().copied());
    let Some((_, hi)) = bounds(all()) else {
        return render(path, |root| no_data(root, title));
    };
    // Whole decades around the positive values, at most 12 (plotters' log ticks never end for
    // a huge span); values outside are drawn at the edges, zero and below at the left.
    let smallest = bounds(all().filter(|v| *v > 0.0)).map_or(1.0, |b| b.0);
    let e_hi = (hi.max(smallest).log10().ceil() as i32).clamp(-299, 307);
    let e_lo = (smallest.log10().floor() as i32).clamp((e_hi - 12).max(-300), e_hi - 1);
    let (lo, hi) = (10f64.powi(e_lo), 10f64.powi(e_hi));
    render(path, |root| {
        let area = root.titled(title, title_style())?;
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(85)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..100.0)?;
        mesh(&mut chart, "latency (ms, log scale)", "percentile")?;
        for (i, (name, values)) in sets.iter().enumerate() {
            let style = PALETTE[i % PALETTE.len()].stroke_width(2);
            let label = match (
                percentile(values, 50.0),
                percentile(values, 95.0),
                percentile(values, 99.0),
            ) {
                (Some(p50), Some(p95), Some(p99)) => {
                    format!("{name}: p50 {}, p95 {}, p99 {}", ms(p50), ms(p95), ms(p99))
                }
                _ => format!("{name} (no data)"),
            };
            let points = cdf_points(values, CDF_POINTS)
                .into_iter()
                .map(|(x, y)| (x.clamp(lo, hi), y));
            chart
                .draw_series(LineSeries::new(points, style))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)
    })
}

/// At most this many points are drawn per CDF (the percentiles use every value).
const CDF_POINTS: usize = 2_000;

/// Points of the empirical CDF of sorted values, (value, percent at or below), at most about
/// `max` of them, always including the first and the last.
fn cdf_points(sorted: &[f64], max: usize) -> Vec<(f64, f64)> {
    let n = sorted.len();
    if n == 0 {
        return Vec::new();
    }
    let step = n.div_ceil(max.max(1));
    let mut points = vec![(sorted[0], 0.0)];
    let mut i = 0;
    while i < n {
        points.push((sorted[i], 100.0 * (i + 1) as f64 / n as f64));
        i += step;
    }
    if !(n - 1).is_multiple_of(step) {
        points.push((sorted[n - 1], 100.0));
    }
    points
}

/// A latency in milliseconds with its unit, seconds from 1000 ms on.
pub(super) fn ms(v: f64) -> String {
    if v.abs() >= 1_000.0 {
        format!("{} s", sig(v / 1_000.0, 3))
    } else {
        format!("{} ms", sig(v, 3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_points_are_bounded_and_span_the_data() {
        let values: Vec<f64> = (0..1_000_001).map(f64::from).collect();
        let points = cdf_points(&values, CDF_POINTS);
        assert!(points.len() <= CDF_POINTS + 2, "{}", points.len());
        assert_eq!(points.first(), Some(&(0.0, 0.0)));
        assert_eq!(points.last(), Some(&(1_000_000.0, 100.0)));
        assert!(points
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(
            cdf_points(&[2.0], CDF_POINTS),
            vec![(2.0, 0.0), (2.0, 100.0)]
        );
        assert!(cdf_points(&[], CDF_POINTS).is_empty());
    }
}
