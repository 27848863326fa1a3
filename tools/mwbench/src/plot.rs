//! PNG plots of a run (plotters, bitmap backend): one value per message
//! size for every op and baseline, log-log, one line each.
//!
//! Text is drawn with a TrueType font read at run time (ab_glyph), so
//! nothing depends on a system font service: `MWBENCH_FONT` names the file,
//! else the first of a few usual DejaVu / Liberation paths is used (Debian's
//! fonts-dejavu-core, which `make bench` installs). Owns the drawing; must
//! not choose what is plotted (that is `report`).

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

/// Where a sans-serif TrueType font is looked for.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
];

/// Registers the font once for the whole process.
pub fn load_font() -> Result<(), String> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let chosen = std::env::var("MWBENCH_FONT").ok();
            let candidates: Vec<&str> = chosen.as_deref().into_iter().chain(FONT_PATHS.iter().copied()).collect();
            let path = candidates.iter().find(|p| Path::new(p).is_file()).ok_or_else(|| {
                format!(
                    "no TrueType font for the plots: install fonts-dejavu-core (make bench does) or set \
                     MWBENCH_FONT to a .ttf file (looked in {})",
                    candidates.join(", ")
                )
            })?;
            let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
            // The font table of plotters keeps 'static references: the font
            // lives as long as the process, loaded once.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{path} is not a usable TrueType font"))
        })
        .clone()
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    /// (size in bytes, value), sizes ascending.
    pub points: Vec<(f64, f64)>,
    /// Baselines are drawn dashed.
    pub baseline: bool,
}

/// `8 B`, `64 KiB`, `1 MiB`.
pub fn size_label(bytes: f64) -> String {
    let b = bytes.round() as u64;
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn bounds(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(0.0, f64::max);
    if !lo.is_finite() || hi <= 0.0 {
        return (1.0, 10.0);
    }
    (lo / 1.6, hi * 1.6)
}

/// Draws `series` into a PNG at `path`: x the message size (log2 axis,
/// labelled in B/KiB/MiB), y `y_desc` (log axis); the legend to the right.
pub fn draw(path: &Path, title: &str, y_desc: &str, series: &[Series]) -> Result<(), String> {
    load_font()?;
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let log2 = |x: f64| x.max(1.0).log2();
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| log2(p.0)));
    let (x0, x1) = (xs.clone().fold(f64::INFINITY, f64::min), xs.fold(f64::NEG_INFINITY, f64::max));
    let (x0, x1) = if x0.is_finite() { (x0.floor() - 0.4, x1.ceil() + 0.4) } else { (0.0, 10.0) };
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let (y0, y1) = bounds(ys);
    let root = BitMapBackend::new(path, (1100, 620)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (plot_area, legend_area) = root.split_horizontally(860);
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    // Every power of two on narrow ranges, every other one (from the
    // smallest size) on wide ones, and always the largest.
    let every = if x1 - x0 > 13.0 { 2 } else { 1 };
    let x_fmt = move |v: &f64| {
        let integral = (v - v.round()).abs() < 1e-6;
        let k = v.round() as i64;
        if integral && ((k - x0.ceil() as i64).rem_euclid(every) == 0 || k == x1.floor() as i64) {
            size_label(v.round().exp2())
        } else {
            String::new()
        }
    };
    let y_fmt = |v: &f64| {
        if *v >= 10.0 {
            format!("{v:.0}")
        } else if *v >= 1.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    };
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc(y_desc)
        .x_labels(((x1 - x0) as usize + 1).max(2))
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(|e| err(&e))?;
    let font = ("sans-serif", 15).into_font().color(&BLACK);
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let style = color.stroke_width(if s.baseline { 2 } else { 3 });
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (log2(x), y)).collect();
        if s.baseline {
            chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 8, 5, style)).map_err(|e| err(&e))?;
        } else {
            chart.draw_series(LineSeries::new(pts.iter().copied(), style)).map_err(|e| err(&e))?;
        }
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(|e| err(&e))?;
        let y = 60 + 24 * i as i32;
        let line = if s.baseline {
            PathElement::new(vec![(10, y), (18, y)], color.stroke_width(3))
        } else {
            PathElement::new(vec![(10, y), (36, y)], color.stroke_width(3))
        };
        legend_area.draw(&line).map_err(|e| err(&e))?;
        if s.baseline {
            legend_area.draw(&PathElement::new(vec![(26, y), (36, y)], color.stroke_width(3))).map_err(|e| err(&e))?;
        }
        legend_area.draw(&Text::new(s.label.clone(), (44, y - 8), font.clone())).map_err(|e| err(&e))?;
    }
    legend_area
        .draw(&Text::new(
            "dashed: baselines",
            (10, 60 + 24 * series.len() as i32 + 8),
            ("sans-serif", 13).into_font().color(&BLACK),
        ))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_renders_with_the_loaded_font() {
        load_font().expect("a TrueType font (fonts-dejavu-core)");
        let (w, h) = (200u32, 60u32);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
            root.draw_text("8 KiB", &("sans-serif", 30).into_text_style(&root), (10, 10)).unwrap();
            root.present().unwrap();
        }
        let dark = buf.chunks_exact(3).filter(|px| px.iter().all(|&c| c < 128)).count();
        assert!(dark > 100, "only {dark} dark pixels: the text did not render");
    }

    #[test]
    fn sizes_are_labelled_in_binary_units() {
        assert_eq!(size_label(8.0), "8 B");
        assert_eq!(size_label(65536.0), "64 KiB");
        assert_eq!(size_label(1048576.0), "1 MiB");
        assert_eq!(size_label(1000.0), "1000 B");
    }
}
