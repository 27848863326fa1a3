//! What mwbench writes: JSON lines on stdout, everything else on stderr
//! (notes, the progress bar, the tables).
//!
//! Owns: both streams. The progress bar (indicatif) draws on stderr only,
//! and only when stderr is a terminal; notes are printed around it so they
//! never tear it. Must not: write anything but whole JSON points to stdout.
//! Under mwrun only rank 0 reports; the other ranks stay silent.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::row::Row;

static SILENT: AtomicBool = AtomicBool::new(false);
static BAR: OnceLock<Mutex<Option<ProgressBar>>> = OnceLock::new();

fn bar() -> &'static Mutex<Option<ProgressBar>> {
    BAR.get_or_init(|| Mutex::new(None))
}

/// Silences this process (a rank other than 0 under mwrun).
pub fn set_silent() {
    SILENT.store(true, Ordering::Relaxed);
}

/// Whether this process reports.
pub fn reporting() -> bool {
    !SILENT.load(Ordering::Relaxed)
}

/// Starts the progress bar for `steps` steps (drawn only on a terminal).
pub fn start_progress(steps: u64) {
    if !reporting() {
        return;
    }
    let pb = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr_with_hz(5));
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}")
            .expect("progress template")
            .progress_chars("=> "),
    );
    pb.enable_steady_tick(Duration::from_millis(500));
    *bar().lock().expect("progress lock") = Some(pb);
}

/// Names the step being measured.
pub fn step(message: String) {
    if let Some(pb) = bar().lock().expect("progress lock").as_ref() {
        pb.set_message(message);
    }
}

/// One step done.
pub fn advance() {
    if let Some(pb) = bar().lock().expect("progress lock").as_ref() {
        pb.inc(1);
    }
}

/// Removes the progress bar.
pub fn finish_progress() {
    if let Some(pb) = bar().lock().expect("progress lock").take() {
        pb.finish_and_clear();
    }
}

/// A line on stderr, printed around the progress bar.
pub fn note(text: &str) {
    if !reporting() {
        return;
    }
    let guard = bar().lock().expect("progress lock");
    match guard.as_ref() {
        Some(pb) => pb.suspend(|| eprintln!("{text}")),
        None => eprintln!("{text}"),
    }
}

/// Prints `row` as one JSON line on stdout (flushed at once, so a consumer
/// sees each point as it is measured) and notes it on stderr.
pub fn emit(row: &Row) {
    if !reporting() {
        return;
    }
    let line = row.to_json().to_string();
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
    let mut what = format!("  measured {} {} {} {} B", row.bench, row.op, row.transport, row.size);
    if let Some(n) = row.ranks {
        what.push_str(&format!(" {n} ranks"));
    }
    if let Some(v) = row.algo.as_ref().or(row.order.as_ref()) {
        what.push_str(&format!(" {v}"));
    }
    if let Some(l) = row.loss_pct {
        what.push_str(&format!(" loss {l}%"));
    }
    note(&what);
}
