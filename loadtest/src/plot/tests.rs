//! The charts drawn and read back: every series and set drawn, no-data charts alike, non-finite
//! values skipped, extreme values still drawn; and the labels.

use std::io::Cursor;
use std::path::Path;

use plotters::prelude::*;

use super::axes::{tick, PALETTE};
use super::cdf::ms;
use super::stats::percentile;
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
