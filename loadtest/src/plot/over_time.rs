//! Samples over time: every sample a point, with the median and 99th percentile of each time
//! window drawn as steps and the band between them shaded.

use std::path::Path;

use plotters::prelude::*;

use super::axes::{legend, mesh, no_data, pad, title_style, PALETTE};
use super::canvas::render;
use super::stats::{bounds, percentile};

/// How [`samples_over_time`] draws its y axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YScale {
    Linear,
    /// Whole decades around the positive values; zero and below are drawn at the bottom.
    Log,
}

/// Time windows the percentile bands of [`samples_over_time`] are computed over.
pub const BAND_WINDOWS: usize = 60;
/// At most this many samples are drawn as points (an even stride over them); the bands use
/// every sample.
pub const MAX_POINTS: usize = 20_000;

/// The median and 99th percentile of the samples in each of `windows` equal time windows over
/// `x_lo..=x_hi`: (window start, window end, p50, p99), windows without samples left out.
pub fn band_windows(samples: &[(f64, f64)], windows: usize) -> Vec<(f64, f64, f64, f64)> {
    let finite: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let Some((x_lo, x_hi)) = bounds(finite.iter().map(|p| p.0)) else {
        return Vec::new();
    };
    let windows = windows.max(1);
    let width = (x_hi - x_lo) / windows as f64;
    let mut per_window: Vec<Vec<f64>> = vec![Vec::new(); windows];
    for (x, y) in finite {
        let at = if width > 0.0 && width.is_finite() {
            (((x - x_lo) / width) as usize).min(windows - 1)
        } else {
            0
        };
        per_window[at].push(y);
    }
    per_window
        .into_iter()
        .enumerate()
        .filter(|(_, ys)| !ys.is_empty())
        .map(|(i, mut ys)| {
            ys.sort_by(f64::total_cmp);
            let (start, end) = if width > 0.0 && width.is_finite() {
                (x_lo + width * i as f64, x_lo + width * (i + 1) as f64)
            } else {
                (x_lo, x_hi)
            };
            let p50 = percentile(&ys, 50.0).expect("a window with samples");
            let p99 = percentile(&ys, 99.0).expect("a window with samples");
            (start, end, p50, p99)
        })
        .collect()
}

/// Samples over time (x usually "seconds since start"): every sample a point, and per time
/// window (see [`BAND_WINDOWS`]) the median and the 99th percentile as lines with the band
/// between them shaded, so the distribution over time shows and distant samples are never
/// joined. Non-finite samples are skipped; with none left it says "no data".
pub fn samples_over_time(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    samples: &[(f64, f64)],
    scale: YScale,
) -> anyhow::Result<()> {
    let finite: Vec<(f64, f64)> = samples
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let (Some(xs), Some(ys)) = (
        bounds(finite.iter().map(|p| p.0)),
        bounds(finite.iter().map(|p| p.1)),
    ) else {
        return render(path, |root| no_data(root, title));
    };
    let bands = band_windows(&finite, BAND_WINDOWS);
    let stride = finite.len().div_ceil(MAX_POINTS).max(1);
    let points: Vec<(f64, f64)> = finite.iter().copied().step_by(stride).collect();
    let x_range = pad(xs, 0.0, 0.0, false);
    let labels = SampleLabels {
        samples: if stride == 1 {
            format!("{} samples", finite.len())
        } else {
            format!("{} samples (every {stride}th drawn)", finite.len())
        },
        x: x_label,
        y: y_label,
    };
    render(path, |root| {
        let area = root.titled(title, title_style())?;
        let mut builder = ChartBuilder::on(&area);
        builder
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(85);
        match scale {
            YScale::Linear => {
                let y_range = pad(ys, 0.05 + 0.045 * 3.0, 0.05, true);
                let mut chart = builder.build_cartesian_2d(x_range, y_range.clone())?;
                draw_samples(&mut chart, &labels, &points, &bands, |y| {
                    y.clamp(y_range.start, y_range.end)
                })
            }
            YScale::Log => {
                let smallest =
                    bounds(finite.iter().map(|p| p.1).filter(|v| *v > 0.0)).map_or(1.0, |b| b.0);
                let e_hi = ((ys.1.max(smallest) * 1.5).log10().ceil() as i32).clamp(-299, 307);
                let e_lo = (smallest.log10().floor() as i32).clamp((e_hi - 12).max(-300), e_hi - 1);
                let (lo, hi) = (10f64.powi(e_lo), 10f64.powi(e_hi));
                let mut chart = builder.build_cartesian_2d(x_range, (lo..hi).log_scale())?;
                draw_samples(&mut chart, &labels, &points, &bands, |y| y.clamp(lo, hi))
            }
        }
    })
}

/// The points of [`samples_over_time`] (drawn translucent) and its band.
const POINT_COLOUR: RGBColor = RGBColor(90, 90, 90);
const BAND_COLOUR: RGBColor = RGBColor(255, 127, 14);

struct SampleLabels<'a> {
    samples: String,
    x: &'a str,
    y: &'a str,
}

/// The mesh, the points, the bands and the legend of [`samples_over_time`] on either y axis.
fn draw_samples<'a, DB, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    labels: &SampleLabels<'_>,
    points: &[(f64, f64)],
    bands: &[(f64, f64, f64, f64)],
    fit: impl Fn(f64) -> f64,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    mesh(chart, labels.x, labels.y)?;
    let dots = POINT_COLOUR.mix(0.35).filled();
    chart
        .draw_series(
            points
                .iter()
                .map(|&(x, y)| Circle::new((x, fit(y)), 2, dots)),
        )?
        .label(labels.samples.clone())
        .legend(move |(x, y)| Circle::new((x + 12, y), 3, POINT_COLOUR.filled()));
    chart
        .draw_series(bands.iter().map(|&(start, end, p50, p99)| {
            Rectangle::new(
                [(start, fit(p50)), (end, fit(p99))],
                BAND_COLOUR.mix(0.25).filled(),
            )
        }))?
        .label("between p50 and p99 of each window")
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 6), (x + 24, y + 6)],
                BAND_COLOUR.mix(0.25).filled(),
            )
        });
    for (name, colour, pick) in [
        ("p50 per window", PALETTE[0], 0),
        ("p99 per window", PALETTE[3], 1),
    ] {
        let style = colour.stroke_width(2);
        // Each window a level; consecutive windows joined by a vertical step, none across a
        // window without samples.
        let mut runs: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut last_end = f64::NAN;
        for &(start, end, p50, p99) in bands {
            let y = fit(if pick == 0 { p50 } else { p99 });
            if runs.is_empty() || start > last_end + (end - start) * 1e-6 {
                runs.push(Vec::new());
            }
            let run = runs.last_mut().expect("a run");
            run.extend([(start, y), (end, y)]);
            last_end = end;
        }
        for (i, run) in runs.into_iter().enumerate() {
            let series = chart.draw_series(LineSeries::new(run, style))?;
            if i == 0 {
                series
                    .label(name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            }
        }
    }
    legend(chart, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn band_windows_hold_each_windows_median_and_p99() {
        // Window 0 holds 1..=100, window 2 holds 1000 only, window 1 nothing.
        let mut samples: Vec<(f64, f64)> = (1..=100).map(|v| (0.5, f64::from(v))).collect();
        samples.push((2.5, 1_000.0));
        samples.push((f64::NAN, 5.0));
        let bands = band_windows(&samples, 3);
        assert_eq!(bands.len(), 2, "{bands:?}");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let (start, end, p50, p99) = bands[0];
        assert!(
            close(start, 0.5) && close(end, 0.5 + 2.0 / 3.0),
            "{bands:?}"
        );
        assert_eq!((p50, p99), (50.0, 99.0));
        let (start, end, p50, p99) = bands[1];
        assert!(
            close(start, 0.5 + 4.0 / 3.0) && close(end, 2.5),
            "{bands:?}"
        );
        assert_eq!((p50, p99), (1_000.0, 1_000.0));
        assert!(band_windows(&[], 3).is_empty());
        assert_eq!(band_windows(&[(4.0, 2.0)], 60), vec![(4.0, 4.0, 2.0, 2.0)]);
    }
}
