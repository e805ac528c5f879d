//! The progress bar of the read-back scan: a verify of a large device takes minutes, and a
//! silent terminal for that long looks like a hang. Drawn by indicatif on stderr, which
//! hides it when stderr is not a terminal (so scripts and `--json` consumers never see
//! it); `--quiet` turns it off on a terminal too.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct ScanBar {
    bar: Option<ProgressBar>,
}

impl ScanBar {
    pub fn new(quiet: bool) -> ScanBar {
        let bar = (!quiet).then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "verify {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .expect("static template"),
            );
            bar
        });
        ScanBar { bar }
    }

    pub fn update(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            b.set_length(total);
            b.set_position(done);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
