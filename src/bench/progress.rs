//! Bench's progress on stderr. On a terminal, a bar naming the row being measured. Where
//! no one sees a bar (a log file, a pipe, a program driving bench), a line per finished
//! row instead: the log shows the run moving, and how far it got when it was stopped.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct Progress {
    bar: ProgressBar,
    /// A line per finished row (stderr is no terminal).
    lines: bool,
    steps: u64,
    done: AtomicU64,
    row: Mutex<String>,
}

impl Progress {
    /// Shows nothing: for runs inside a program or a test.
    pub fn hidden() -> Progress {
        Progress::new(ProgressBar::hidden(), false, 0)
    }

    /// The command's progress over `steps` rows: nothing with `quiet`; a bar on a
    /// terminal; elsewhere a line per finished row, unless `json` (which, like the line
    /// naming the target, keeps stderr for warnings and errors).
    pub fn on_stderr(steps: u64, quiet: bool, json: bool) -> Progress {
        if quiet {
            return Progress::hidden();
        }
        if !std::io::stderr().is_terminal() {
            return Progress::new(ProgressBar::hidden(), !json, steps);
        }
        let bar = ProgressBar::with_draw_target(Some(steps), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                .expect("valid template"),
        );
        Progress::new(bar, false, steps)
    }

    fn new(bar: ProgressBar, lines: bool, steps: u64) -> Progress {
        Progress {
            bar,
            lines,
            steps,
            done: AtomicU64::new(0),
            row: Mutex::new(String::new()),
        }
    }

    /// The row now measured, e.g. `sweep 4.0 KiB`.
    pub fn start(&self, row: String) {
        self.bar.set_message(row.clone());
        *self.row.lock().unwrap_or_else(|e| e.into_inner()) = row;
    }

    /// The row named by the last [`start`](Self::start) is finished. A row cut short by
    /// Ctrl-C gets no line: it is not done, and the line would say it was.
    pub fn done(&self) {
        self.bar.inc(1);
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if self.lines && !super::measure::stopped() {
            let row = self.row.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!("plugpull bench: {row} done (row {n} of {})", self.steps);
        }
    }

    /// Removes the bar from the terminal before the tables are printed.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
