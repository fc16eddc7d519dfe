//! PNG charts for the load test's report: line charts over time and latency CDFs. Drawn with
//! `plotters` into memory, encoded with `png`; text uses the embedded Noto Sans font, so no
//! system font library is needed.

use std::fs::File;
use std::io::BufWriter;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use ab_glyph::{point, Font as _, FontRef, ScaleFont as _};
use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::register_font;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendTextStyle, DrawingErrorKind};

/// Width and height in pixels of every chart.
pub const SIZE: (u32, u32) = (1200, 700);

/// One named series of (x, y) points.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart (x usually "seconds since start"), several series, legend, axis labels, title.
/// Points with a NaN or infinite coordinate are skipped; with no points left it says "no data".
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> anyhow::Result<()> {
    let series: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|s| {
            let mut points: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            (s.name.as_str(), points)
        })
        .collect();
    let all = || series.iter().flat_map(|(_, p)| p.iter());
    let (Some(xs), Some(ys)) = (bounds(all().map(|p| p.0)), bounds(all().map(|p| p.1))) else {
        return render(path, |root| no_data(root, title));
    };
    let x_range = pad(xs, 0.0, 0.0, false);
    // Room above the data for the legend, which sits in the upper left corner.
    let y_range = pad(ys, 0.05 + 0.045 * series.len() as f64, 0.05, true);
    render(path, |root| {
        let area = root.titled(title, title_style())?;
        let mut chart = ChartBuilder::on(&area)
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(85)
            .build_cartesian_2d(x_range, y_range)?;
        mesh(&mut chart, x_label, y_label)?;
        for (i, (name, points)) in series.iter().enumerate() {
            let style = PALETTE[i % PALETTE.len()].stroke_width(2);
            let label = if points.is_empty() {
                format!("{name} (no data)")
            } else {
                (*name).to_owned()
            };
            // A lone point draws no line, so mark it.
            let marker = if points.len() == 1 { 4 } else { 0 };
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style).point_size(marker))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    })
}

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

/// Axes, labels and the light grid, alike on every chart.
fn mesh<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_label: &str,
    y_label: &str,
) -> anyhow::Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .light_line_style(LIGHT_GRID)
        .max_light_lines(4)
        .draw()?;
    Ok(())
}

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

/// Category colours, cycled through by the series.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];
const LIGHT_GRID: RGBColor = RGBColor(235, 235, 235);
/// The points of [`samples_over_time`] (drawn translucent) and its band.
const POINT_COLOUR: RGBColor = RGBColor(90, 90, 90);
const BAND_COLOUR: RGBColor = RGBColor(255, 127, 14);
/// At most this many points are drawn per CDF (the percentiles use every value).
const CDF_POINTS: usize = 2_000;

fn title_style() -> TextStyle<'static> {
    ("sans-serif", 26).into_font().color(&BLACK)
}

/// The embedded font, parsed and registered with plotters (for text layout) once per process
/// under the name `sans-serif`.
fn chart_font() -> anyhow::Result<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = ttf_noto_sans::REGULAR;
        register_font("sans-serif", FontStyle::Normal, bytes).ok()?;
        FontRef::try_from_slice(bytes).ok()
    })
    .as_ref()
    .context("the embedded chart font could not be parsed")
}

type Area<'a> = DrawingArea<Canvas<'a>, Shift>;

/// Draws onto a white canvas of [`SIZE`] and writes it to `path` as an RGB PNG.
fn render(path: &Path, draw: impl FnOnce(&Area<'_>) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let font = chart_font()?;
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let inner = BitMapBackend::with_buffer(&mut rgb, SIZE);
        let root = Canvas { inner, font }.into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root).with_context(|| format!("drawing {}", path.display()))?;
        root.present()?;
    }
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut encoder = png::Encoder::new(BufWriter::new(file), w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::Fast);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&rgb)?;
    writer
        .finish()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The bitmap backend with its own text drawing: plotters' `ab_glyph` renderer drops each
/// glyph's left side bearing ("1 0.9 ms"). Layout sizes still come from plotters.
struct Canvas<'a> {
    inner: BitMapBackend<'a>,
    font: &'static FontRef<'static>,
}

type BitMapError = <BitMapBackend<'static> as DrawingBackend>::ErrorType;
type DrawResult = Result<(), DrawingErrorKind<BitMapError>>;

impl DrawingBackend for Canvas<'_> {
    type ErrorType = BitMapError;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> DrawResult {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> DrawResult {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> DrawResult {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> DrawResult {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> DrawResult {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> DrawResult {
        self.inner.blit_bitmap(pos, size, src)
    }

    fn draw_text<T: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &T,
        pos: BackendCoord,
    ) -> DrawResult {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        // Anchor the text's layout box at `pos` as plotters' default implementation does.
        let ((x0, y0), (x1, y1)) = style
            .layout_box(text)
            .map_err(|e| DrawingErrorKind::FontError(Box::new(e)))?;
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Center => -(x1 - x0) / 2,
            HPos::Right => -(x1 - x0),
        } - x0;
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -(y1 - y0) / 2,
            VPos::Bottom => -(y1 - y0),
        } - y0;
        let font = self.font.as_scaled(style.size() as f32);
        // The baseline sits so that capital letters are centred in the layout box.
        let cap = font
            .outline_glyph(font.scaled_glyph('H'))
            .map_or(0.7 * font.height(), |g| -g.px_bounds().min.y);
        let baseline = ((y1 - y0) as f32 + cap) / 2.0;
        let transform = style.transform();
        let mut caret = 0.0;
        let mut previous = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = previous {
                caret += font.kern(p, id);
            }
            previous = Some(id);
            let glyph = id.with_scale_and_position(font.scale(), point(caret, baseline));
            caret += font.h_advance(id);
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outline.px_bounds();
            let mut result = Ok(());
            outline.draw(|gx, gy, coverage| {
                if result.is_err() || coverage <= 0.0 {
                    return;
                }
                let (x, y) = transform.transform(
                    bounds.min.x as i32 + gx as i32 + dx,
                    bounds.min.y as i32 + gy as i32 + dy,
                );
                let alpha = color.alpha * f64::from(coverage.min(1.0));
                result = self.inner.draw_pixel(
                    (pos.0 + x, pos.1 + y),
                    BackendColor {
                        alpha,
                        rgb: color.rgb,
                    },
                );
            });
            result?;
        }
        Ok(())
    }
}

fn no_data(root: &Area<'_>, title: &str) -> anyhow::Result<()> {
    let area = root.titled(title, title_style())?;
    let (w, h) = area.dim_in_pixel();
    let style = ("sans-serif", 32)
        .into_font()
        .color(&RGBColor(120, 120, 120))
        .pos(Pos::new(HPos::Center, VPos::Center));
    area.draw_text("no data", &style, (w as i32 / 2, h as i32 / 2))?;
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> anyhow::Result<()> {
    chart
        .configure_series_labels()
        .position(position)
        .margin(12)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.9))
        .border_style(RGBColor(190, 190, 190))
        .draw()
        .map_err(|e| anyhow::anyhow!("drawing the legend: {e}"))
}

/// Smallest and largest of the values, if any.
fn bounds(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// An axis range around the data's `lo..=hi`: `top` and `bottom` are the shares of the height
/// left free above and below the data; non-negative data starts at zero if `from_zero`. A
/// zero-width range is widened. Both ends and the span are finite.
fn pad((lo, hi): (f64, f64), top: f64, bottom: f64, from_zero: bool) -> Range<f64> {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        let d = (hi.abs() * 0.1).max(1.0);
        (lo - d, hi + d)
    };
    let (lo, bottom) = if from_zero && lo >= 0.0 {
        (0.0, 0.0)
    } else {
        (lo, bottom)
    };
    let top = top.clamp(0.0, 0.5);
    let bottom = bottom.clamp(0.0, 0.25);
    // Half the axis' span, computed from halves so it stays finite near f64::MAX.
    let half = (hi / 2.0 - lo / 2.0) / (1.0 - top - bottom);
    let new_lo = lo - 2.0 * half * bottom;
    let new_hi = hi + 2.0 * half * top;
    let new_lo = if new_lo.is_finite() { new_lo } else { lo };
    let new_hi = if new_hi.is_finite() { new_hi } else { hi };
    // plotters' tick placement never ends for an infinite span.
    if (new_hi - new_lo).is_finite() {
        new_lo..new_hi
    } else {
        new_lo.max(f64::MIN / 2.0)..new_hi.min(f64::MAX / 2.0)
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

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

/// Axis tick: about four significant digits, k/M/G for large values.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", sig(v / 1e9, 4))
    } else if a >= 1e6 {
        format!("{}M", sig(v / 1e6, 4))
    } else if a >= 1e4 {
        format!("{}k", sig(v / 1e3, 4))
    } else {
        sig(v, 4)
    }
}

/// A latency in milliseconds with its unit, seconds from 1000 ms on.
fn ms(v: f64) -> String {
    if v.abs() >= 1_000.0 {
        format!("{} s", sig(v / 1_000.0, 3))
    } else {
        format!("{} ms", sig(v, 3))
    }
}

/// `v` with `digits` significant digits (more left of the point are kept), no trailing zeros.
fn sig(v: f64, digits: i32) -> String {
    if v == 0.0 {
        return "0".to_owned();
    }
    if !v.is_finite() {
        return v.to_string();
    }
    let decimals = (digits - 1 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    /// Decodes a chart, checking the PNG signature and the size in its IHDR chunk; RGB bytes.
    fn read_png(path: &Path) -> Vec<u8> {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(bytes[..8], *b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(bytes[12..16], *b"IHDR", "first chunk");
        let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((be(16), be(20)), SIZE, "width and height in IHDR");
        let mut reader = png::Decoder::new(Cursor::new(bytes)).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut rgb).unwrap();
        assert_eq!((info.width, info.height), SIZE);
        assert_eq!(info.color_type, png::ColorType::Rgb);
        rgb.truncate(info.buffer_size());
        rgb
    }

    fn pixels_of(rgb: &[u8], c: RGBColor) -> usize {
        rgb.chunks_exact(3)
            .filter(|p| *p == [c.0, c.1, c.2])
            .count()
    }

    fn non_white(rgb: &[u8]) -> usize {
        rgb.chunks_exact(3).filter(|p| *p != [255; 3]).count()
    }

    fn wave(name: &str, scale: f64) -> Series {
        Series {
            name: name.to_owned(),
            points: (0..300)
                .map(|s| (f64::from(s), scale * (2.0 + (f64::from(s) / 20.0).sin())))
                .collect(),
        }
    }

    /// Every chart here shares one title, so the no-data charts of both kinds are identical.
    fn chart(dir: &Path, name: &str, series: &[Series]) -> Vec<u8> {
        let path = dir.join(name);
        line_chart(
            &path,
            "Throughput",
            "seconds since start",
            "per second",
            series,
        )
        .unwrap();
        read_png(&path)
    }

    fn cdf(dir: &Path, name: &str, samples: &[(String, Vec<f64>)]) -> Vec<u8> {
        let path = dir.join(name);
        latency_cdf(&path, "Throughput", samples).unwrap();
        read_png(&path)
    }

    // A series' legend sample is 24 px of line; its data line crosses the whole plot.
    const LINE_PIXELS: usize = 500;

    #[test]
    fn line_chart_draws_every_series() {
        let dir = tempfile::tempdir().unwrap();
        let data = chart(
            dir.path(),
            "data.png",
            &[wave("rows", 1_000.0), wave("requests", 300.0)],
        );
        let empty = chart(dir.path(), "empty.png", &[]);
        for colour in &PALETTE[..2] {
            assert!(pixels_of(&data, *colour) > LINE_PIXELS, "{colour:?}");
            assert_eq!(pixels_of(&empty, *colour), 0, "{colour:?}");
        }
        assert_eq!(pixels_of(&data, PALETTE[2]), 0);
        assert!(non_white(&data) > 2 * non_white(&empty));
    }

    #[test]
    fn latency_cdf_draws_every_set() {
        let dir = tempfile::tempdir().unwrap();
        let fast: Vec<f64> = (1..=5_000).map(|i| f64::from(i) / 1_000.0).collect();
        let slow: Vec<f64> = (1..=300).map(|i| f64::from(i * i)).collect();
        let data = cdf(
            dir.path(),
            "data.png",
            &[("fast".into(), fast), ("slow".into(), slow)],
        );
        let empty = cdf(dir.path(), "empty.png", &[]);
        for colour in &PALETTE[..2] {
            assert!(pixels_of(&data, *colour) > LINE_PIXELS, "{colour:?}");
            assert_eq!(pixels_of(&empty, *colour), 0, "{colour:?}");
        }
        assert!(non_white(&data) > 2 * non_white(&empty));
    }

    #[test]
    fn empty_input_draws_the_same_no_data_chart() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let empty = chart(d, "none.png", &[]);
        assert!(non_white(&empty) > 100, "title and \"no data\" are drawn");
        let nothing_finite = Series {
            name: "rows".into(),
            points: vec![
                (f64::NAN, 1.0),
                (1.0, f64::INFINITY),
                (f64::NEG_INFINITY, 2.0),
            ],
        };
        let same = [
            chart(d, "empty-series.png", &[Series::default()]),
            chart(d, "non-finite.png", &[nothing_finite]),
            cdf(d, "cdf-none.png", &[]),
            cdf(
                d,
                "cdf-empty.png",
                &[
                    ("a".into(), vec![]),
                    ("b".into(), vec![f64::NAN, f64::INFINITY]),
                ],
            ),
        ];
        for (i, rgb) in same.iter().enumerate() {
            assert!(*rgb == empty, "chart {i} differs from the no-data chart");
        }
    }

    #[test]
    fn non_finite_values_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let clean = wave("rows", 10.0);
        let mut dirty = clean.clone();
        dirty.points.insert(5, (f64::NAN, 3.0));
        dirty.points.insert(50, (7.0, f64::INFINITY));
        dirty.points.push((f64::NEG_INFINITY, f64::NAN));
        assert!(chart(d, "clean.png", &[clean]) == chart(d, "dirty.png", &[dirty]));

        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let mut with_nan = values.clone();
        with_nan.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY]);
        assert!(
            cdf(d, "clean-cdf.png", &[("a".into(), values)])
                == cdf(d, "dirty-cdf.png", &[("a".into(), with_nan)])
        );
    }

    #[test]
    fn degenerate_and_extreme_values_still_draw() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let series = |points: Vec<(f64, f64)>| Series {
            name: "s".into(),
            points,
        };
        let charts = [
            vec![series(vec![(5.0, 3.0)])],
            vec![series(vec![(1.0, 0.0), (2.0, 0.0)])],
            vec![series(vec![(0.0, -5.0), (1.0, -7.0)])],
            vec![series(vec![(f64::MIN, f64::MAX), (f64::MAX, f64::MIN)])],
            vec![series(vec![(0.0, 1e-300), (1e300, 1e300)])],
        ];
        for (i, s) in charts.iter().enumerate() {
            let rgb = chart(d, &format!("line-{i}.png"), s);
            assert!(pixels_of(&rgb, PALETTE[0]) > 0, "chart {i}");
        }
        let sets = [
            vec![0.0, 0.0, 0.0],
            vec![-3.0, 0.0, 2.0],
            vec![5.0],
            vec![f64::MIN_POSITIVE, f64::MAX],
            vec![1e-320, 1e-300],
        ];
        for (i, values) in sets.into_iter().enumerate() {
            let rgb = cdf(d, &format!("cdf-{i}.png"), &[("a".into(), values)]);
            assert!(pixels_of(&rgb, PALETTE[0]) > 0, "set {i}");
        }
    }

    fn over_time(dir: &Path, name: &str, samples: &[(f64, f64)], scale: YScale) -> Vec<u8> {
        let path = dir.join(name);
        samples_over_time(&path, "Throughput", "s", "ms", samples, scale).unwrap();
        read_png(&path)
    }

    /// Pixels of `c` in the columns `from..to` below the title.
    fn pixels_in_columns(rgb: &[u8], c: RGBColor, from: usize, to: usize) -> usize {
        let width = SIZE.0 as usize;
        rgb.chunks_exact(3)
            .enumerate()
            .filter(|(i, p)| {
                let (x, y) = (i % width, i / width);
                (from..to).contains(&x) && y > 60 && *p == [c.0, c.1, c.2]
            })
            .count()
    }

    #[test]
    fn samples_over_time_draws_points_and_bands_but_joins_no_distant_samples() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Two bursts far apart in time: nothing may be drawn between them.
        let mut samples: Vec<(f64, f64)> = (0..1_000)
            .map(|i| (f64::from(i % 10), 1.0 + f64::from(i % 100)))
            .collect();
        samples.extend((0..1_000).map(|i| (290.0 + f64::from(i % 10), 50.0 + f64::from(i % 7))));
        for scale in [YScale::Linear, YScale::Log] {
            let rgb = over_time(d, &format!("{scale:?}.png"), &samples, scale);
            for line in [PALETTE[0], PALETTE[3]] {
                assert!(pixels_of(&rgb, line) > 50, "{scale:?}: {line:?} drawn");
                assert_eq!(
                    pixels_in_columns(&rgb, line, 500, 780),
                    0,
                    "{scale:?}: {line:?} crosses the gap between the bursts"
                );
            }
            assert!(non_white(&rgb) > 20_000, "{scale:?}: points and bands");
        }
        let empty = over_time(d, "none.png", &[], YScale::Log);
        assert!(
            empty == chart(d, "line-none.png", &[]),
            "the same no-data chart"
        );
        let non_finite = [(f64::NAN, 1.0), (2.0, f64::INFINITY)];
        assert!(over_time(d, "nan.png", &non_finite, YScale::Linear) == empty);
        // Degenerate input still draws: one sample, zero on a log axis, one instant.
        for (i, samples) in [
            vec![(5.0, 3.0)],
            vec![(1.0, 0.0), (2.0, 0.0)],
            vec![(7.0, 1.0), (7.0, 9.0)],
        ]
        .iter()
        .enumerate()
        {
            let rgb = over_time(d, &format!("degenerate-{i}.png"), samples, YScale::Log);
            assert!(pixels_of(&rgb, PALETTE[0]) > 0, "case {i}");
        }
    }

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

    #[test]
    fn percentiles_and_labels() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), Some(50.0));
        assert_eq!(percentile(&values, 95.0), Some(95.0));
        assert_eq!(percentile(&values, 99.0), Some(99.0));
        assert_eq!(percentile(&values, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile(&[], 50.0), None);

        assert_eq!(ms(4.0937), "4.09 ms");
        assert_eq!(ms(0.59212), "0.592 ms");
        assert_eq!(ms(120.0), "120 ms");
        assert_eq!(ms(1_234.5), "1.23 s");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(2_500.0), "2500");
        assert_eq!(tick(40_000.0), "40k");
        assert_eq!(tick(-2_500_000.0), "-2.5M");
    }

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
