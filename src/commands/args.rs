//! The command line, as clap definitions only. Each subcommand's module under
//! `commands/` turns these arguments into the typed options its domain module takes.
//!
//! Why mirror enums: clap derives help text and accepted values from `ValueEnum`, but the
//! domain enums ([`FlushMethod`], [`Placement`], the bench tables and IOPS `Op` and
//! `Pattern`) must not depend on clap. Each has a clap-side twin here with the same
//! variants and doc comments (so `--help` is unchanged) and a `From` into the domain
//! type (here, or in `commands/bench.rs` for bench's, so this file imports no bench
//! module).

use crate::device::FlushMethod;
use crate::model::Placement;
pub use crate::units::SizeRange;
use crate::units::{UnitError, parse_duration, parse_size, parse_size_usize};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "plugpull",
    version,
    about = "Does this drive keep the writes it acknowledged as flushed when the power is cut?",
    long_about = "plugpull writes checksummed, sequence-numbered records to a drive, flushes them, \
and acknowledges every flushed record to a witness on another machine. After you cut the \
power, `plugpull verify` reads the drive back and reports every acknowledged record the drive \
lost, tore, corrupted or misplaced.\n\nStart with `plugpull demo` (no hardware needed)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the witness: log every acknowledgement durably (on a machine that keeps power).
    Listen(ListenArgs),
    /// Write records to TARGET, flush, and acknowledge each flushed record to the witness.
    ///
    /// Exit codes: 0 stopped at its limit (--duration, --count) or by SIGTERM; 2 usage or
    /// tool error, refused target; 4 the target failed mid-run (what a power cut looks
    /// like); 130 interrupted by Ctrl-C (it names the last record durable at the witness).
    Write(WriteArgs),
    /// After the cut: read TARGET back and report every acknowledged record that was lost.
    ///
    /// Exit codes: 0 PASS; 1 FAIL; 2 usage or tool error (unreachable witness, a run
    /// written to another drive, no run found); 3 INCONCLUSIVE (no acks, a read timed
    /// out, an ack log damaged or not proven whole, with no loss seen); 130 interrupted by
    /// Ctrl-C (no verdict: run it again).
    #[command(after_long_help = crate::verify::plain::help_legend())]
    Verify(VerifyArgs),
    /// Copy a run's ack log from the witness into a file (for `verify --acks`).
    Fetch(FetchArgs),
    /// List a witness's runs, newest first: run id, started, acks, durable up to, drive.
    Runs(RunsArgs),
    /// Replay a dm-log-writes log of a run to every flush and verify each crash state.
    Replay(ReplayArgs),
    /// Measure the flush-latency fingerprint of TARGET.
    Bench(BenchArgs),
    /// Serve a simulated drive with a volatile cache and fault profiles over FUSE.
    Simdrive(SimdriveArgs),
    /// A whole cycle on a simulated drive, no hardware needed: write, cut, verify.
    Demo(DemoArgs),
    /// Many seeded in-process power-cut cycles: no false alarm, no miss, findings = oracle.
    Soak(SoakArgs),
    /// Many unattended power cuts through a power switch, each verified and recorded.
    Campaign(CampaignArgs),
    /// Render verify reports (one run, or many as a campaign) as one self-contained HTML page.
    Report(ReportArgs),
    /// Print shell completions for SHELL on stdout (generated from these definitions).
    Completions(CompletionsArgs),
    /// Write man pages (plugpull.1 and one per subcommand) into a directory.
    Man(ManArgs),
    /// Whole-host campaigns: run at boot on the host under test (systemd unit in
    /// hardware/systemd/); verifies the previous run, reports, starts the next.
    Agent(AgentArgs),
}

fn size(s: &str) -> Result<u64, UnitError> {
    parse_size(s)
}
fn size_usize(s: &str) -> Result<usize, UnitError> {
    parse_size_usize(s)
}
fn duration(s: &str) -> Result<Duration, UnitError> {
    parse_duration(s)
}

/// `--flush`: how each record is made durable (see [`FlushMethod`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FlushArg {
    /// fdatasync(2) after each write: data plus the metadata needed to read it back.
    Fdatasync,
    /// fsync(2) after each write.
    Fsync,
    /// Open with O_DSYNC: every write returns only once durable (FUA or write+flush).
    Dsync,
    /// No flush at all: a control run that is expected to lose data at a cut.
    None,
}

impl From<FlushArg> for FlushMethod {
    fn from(a: FlushArg) -> FlushMethod {
        match a {
            FlushArg::Fdatasync => FlushMethod::Fdatasync,
            FlushArg::Fsync => FlushMethod::Fsync,
            FlushArg::Dsync => FlushMethod::Dsync,
            FlushArg::None => FlushMethod::None,
        }
    }
}

/// `write --flush`: the device methods plus, for trees only, a hidden testing-only one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WriteFlushArg {
    /// fdatasync(2) after each write: data plus the metadata needed to read it back.
    Fdatasync,
    /// fsync(2) after each write (trees: the file, then its directory).
    Fsync,
    /// Open with O_DSYNC: every write returns only once durable (FUA or write+flush).
    Dsync,
    /// No flush at all: a control run that is expected to lose data at a cut.
    None,
    /// Trees only, for tests of the tests: fsync files but never their directories, so
    /// a cut loses names (docs/tree.md). Hidden: it makes a run lie.
    #[value(name = "testing-only-skip-dir-fsync", hide = true)]
    TestingOnlySkipDirFsync,
}

impl WriteFlushArg {
    /// The device method, or None for the tree-only testing mode.
    pub fn device(self) -> Option<FlushMethod> {
        match self {
            WriteFlushArg::Fdatasync => Some(FlushMethod::Fdatasync),
            WriteFlushArg::Fsync => Some(FlushMethod::Fsync),
            WriteFlushArg::Dsync => Some(FlushMethod::Dsync),
            WriteFlushArg::None => Some(FlushMethod::None),
            WriteFlushArg::TestingOnlySkipDirFsync => None,
        }
    }
}

/// `--placement`: where records go within the target (see [`Placement`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// Each stream writes its share of the region front to back, wrapping around.
    Sequential,
    /// Each record at a random record-aligned offset within the stream's share.
    Random,
}

impl From<PlacementArg> for Placement {
    fn from(a: PlacementArg) -> Placement {
        match a {
            PlacementArg::Sequential => Placement::Sequential,
            PlacementArg::Random => Placement::Random,
        }
    }
}

/// `bench --iops-ops`: the operations of the IOPS table (`bench::iops::Op`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IopsOpArg {
    Read,
    Write,
}

/// `bench --iops-patterns`: the access patterns of the IOPS table
/// (`bench::iops::Pattern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum IopsPatternArg {
    Sequential,
    Random,
}

#[derive(Args, Debug, Clone)]
pub struct ListenArgs {
    /// Address to listen on. The witness belongs on a machine that keeps power.
    #[arg(long, default_value = "0.0.0.0:7420")]
    pub bind: String,
    /// Directory for the ack logs (one file per run) and the journal that makes them
    /// durable (`*.journal`, replayed into the logs at start). One witness per directory.
    /// Default: /var/lib/plugpull/witness as root, else $XDG_STATE_HOME/plugpull/witness
    /// (~/.local/state/plugpull/witness without XDG_STATE_HOME); created if missing.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Most concurrent writer connections (after their Hello). Connections still in
    /// their handshake (at most 256, the oldest dropped first) and fetches (at most 16)
    /// have limits of their own.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Close a connection that completes no frame for this long (heartbeats keep
    /// writers alive; a peer trickling bytes does not).
    #[arg(long, value_parser = duration, default_value = "60s")]
    pub idle_timeout: Duration,
    /// Close a connection that has not sent Hello or Fetch (after Auth) within this long
    /// of connecting.
    #[arg(long, value_parser = duration, default_value = "5s")]
    pub handshake_timeout: Duration,
    /// Largest frame accepted from a peer, in bytes (256 KiB to 16 MiB).
    #[arg(long, value_parser = size_usize, default_value = "4M")]
    pub max_frame_bytes: usize,
    /// Pre-shared key file: every frame must carry a MAC made with it. Without it, the
    /// witness warns when bound to a non-loopback address. Make one with
    /// `head -c 32 /dev/urandom | base64 > witness.key`.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
}

/// A fixed record size ("4k") or an inclusive range ("4k-64k"): see
/// [`crate::units::parse_size_range`].
pub fn size_range(s: &str) -> Result<SizeRange, UnitError> {
    crate::units::parse_size_range(s)
}

#[derive(Args, Debug, Clone)]
pub struct WriteArgs {
    /// A block device or a file (files are created and preallocated), or an existing
    /// directory: then a tree of files is written into it (docs/tree.md).
    pub target: PathBuf,
    /// The witness, HOST:PORT.
    #[arg(long)]
    pub witness: String,
    /// The witness's pre-shared key file (same as `listen --key-file`).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Bytes of the target to use (default: the whole device, or 1G for a new file).
    #[arg(long, allow_hyphen_values = true, value_parser = size)]
    pub size: Option<u64>,
    /// Where the region starts on the target.
    #[arg(long, allow_hyphen_values = true, value_parser = size, default_value = "0")]
    pub offset: u64,
    /// Record size: fixed ("4k") or a range ("4k-64k"); whole 512-byte sectors.
    #[arg(long, value_parser = size_range, default_value = "4k")]
    pub record_size: SizeRange,
    /// Where each stream puts its next record: the next slot of its share (wrapping), or a
    /// seeded random slot.
    #[arg(long, value_enum, default_value = "sequential")]
    pub placement: PlacementArg,
    /// Writer threads; the region is split into this many equal, disjoint shares.
    #[arg(long, default_value_t = 1)]
    pub streams: u16,
    /// How each record is made durable before it is acknowledged [default: fdatasync;
    /// for a directory fsync: the file, then its directory].
    #[arg(long, value_enum)]
    pub flush: Option<WriteFlushArg>,
    /// For a directory: files in the untar-shaped tree (bytes scale with them, 528 MB
    /// for the seeds' 53,000).
    #[arg(long, value_name = "N", default_value_t = 53_000)]
    pub files: u32,
    /// Records each stream writes one at a time before one flush covers (and acks) them all.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub batch: u32,
    #[command(flatten)]
    pub depth: DepthArgs,
    /// Write through the page cache instead of O_DIRECT.
    #[arg(long)]
    pub no_direct: bool,
    /// Stop after this long (e.g. 30s, 5m). Without --duration or --count, run until
    /// interrupted or the target fails.
    #[arg(long, value_parser = duration)]
    pub duration: Option<Duration>,
    /// Stop after this many records (all streams together; for a directory, files).
    #[arg(long)]
    pub count: Option<u64>,
    /// Seed for placement and sizes (random if not given; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Allow overwriting PATH even though it holds data (it must be TARGET itself).
    #[arg(long, value_name = "PATH")]
    pub destroy_data_on: Option<PathBuf>,
    /// Print the final summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No status line on a terminal, no timestamped progress lines elsewhere (errors,
    /// warnings and the summary are still printed).
    #[arg(long, short)]
    pub quiet: bool,
    /// Pause writing while this many acks are not yet durable at the witness (a witness
    /// that is away or slow); writing resumes as it confirms them.
    #[arg(long, value_name = "N", default_value_t = 1 << 20)]
    pub max_unconfirmed: usize,
}

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("acks_from").required(true).args(["witness", "acks"])))]
pub struct VerifyArgs {
    /// The block device or file the run wrote to.
    pub target: PathBuf,
    /// Fetch the acks from this witness, HOST:PORT.
    #[arg(long)]
    pub witness: Option<String>,
    /// Read the acks from a log file (a witness log or `plugpull fetch` output).
    #[arg(long)]
    pub acks: Option<PathBuf>,
    /// The witness's pre-shared key file, to authenticate the fetched acks.
    #[arg(long, value_name = "PATH", requires = "witness")]
    pub key_file: Option<PathBuf>,
    /// The run to verify (32 hex digits); default: the latest run for this drive, found
    /// by its identity (WWN/serial, a loop device's backing file, a file's inode and file
    /// system), else by the run stamps on the drive.
    #[arg(long)]
    pub run: Option<String>,
    /// Verify even when TARGET is not the drive the run was written to (another
    /// WWN/serial, backing file or file) and carries none of the run's stamps. Without
    /// it such a run is refused (exit 2): judging a drive by another drive's records
    /// reports them all lost.
    #[arg(long)]
    pub allow_identity_mismatch: bool,
    /// The power was not cut on purpose (a rehearsal, a test of plugpull itself): judge
    /// the data alone. Without it, a run whose writer finished or was stopped before
    /// the power went gets no PASS ("no power cut during writing", exit 3).
    #[arg(long)]
    pub rehearsal: bool,
    #[command(flatten)]
    pub output: FormatArgs,
    /// Only the verdict line.
    #[arg(long, short)]
    pub quiet: bool,
    /// A read that takes longer than this marks the rest of the target unreadable; with
    /// no damage seen in what was read, the verdict is then INCONCLUSIVE (exit 3).
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub read_timeout: Duration,
    /// Read the run's whole region, not just what its acknowledged records cover (their
    /// span, or only their own blocks when they are few for it), so a misdirected write
    /// that landed anywhere in the region is found (slower on big regions).
    #[arg(long)]
    pub scan_region: bool,
    /// Peak memory verify may use (e.g. 512M, 2G). A run whose live records would not
    /// fit is judged one part of its region at a time, each part's acks kept in a work
    /// file (docs/GUIDE.md "Restore and verify").
    #[arg(long, value_parser = memory, default_value = "512M", value_name = "SIZE")]
    pub memory: u64,
    /// Where verify keeps its work files when a run is judged in parts (default: TMPDIR,
    /// else /tmp). The files have no name there and are gone when verify ends. It must
    /// exist, be writable and not be on the drive under test (checked before reading).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
}

/// `--memory`: a size of at least [`MIN_MEMORY`].
fn memory(s: &str) -> Result<u64, String> {
    let b = parse_size(s).map_err(|e| e.to_string())?;
    if b < MIN_MEMORY {
        return Err(format!(
            "{s} is too little: it needs at least {} (give e.g. 128M)",
            crate::units::fmt_bytes(MIN_MEMORY)
        ));
    }
    Ok(b)
}

/// The least `--memory`: the fixed buffers and a part of some use.
pub const MIN_MEMORY: u64 = 64 << 20;

#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The dm-log-writes log device, or a file holding its bytes (docs/replay.md).
    pub log: PathBuf,
    /// Fetch the run's acks from this witness, HOST:PORT.
    #[arg(long, required_unless_present = "acks", conflicts_with = "acks")]
    pub witness: Option<String>,
    /// Read the acks from a log file (a witness log or `plugpull fetch` output).
    #[arg(long)]
    pub acks: Option<PathBuf>,
    /// The witness's pre-shared key file, to authenticate the acks.
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// The run (32 hex digits); default: the run of the newest plugpull stamp in the
    /// log's writes.
    #[arg(long)]
    pub run: Option<String>,
    /// The data device's contents before the log's first write; default: zeroes of the
    /// run's target size.
    #[arg(long, value_name = "IMAGE")]
    pub base: Option<PathBuf>,
    /// Also judge N states with writes left out: half leave out a write an ack depends
    /// on (expected FAIL, naming the record), half only writes after the last flush
    /// (expected PASS).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub drops: u32,
    /// Seed for choosing the drop states; default: random (printed in the JSON).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Judge every durable point with a whole verify rather than re-reading only the
    /// records that changed (slow on long logs; the reference for the fast path).
    #[arg(long)]
    pub full_verify: bool,
    /// Directory for the scratch image (a sparse file, removed at the end); default:
    /// the system's temporary directory ($TMPDIR).
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// A read of the scratch image slower than this counts as unreadable (as in verify).
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub read_timeout: Duration,
    /// Peak memory replay may use (e.g. 512M, 2G). Replay holds each acknowledged
    /// record's state for the whole log (about 160 bytes an ack): a run that needs more
    /// is refused before the log is replayed, naming the --memory it needs.
    #[arg(long, value_parser = memory, default_value = "512M", value_name = "SIZE")]
    pub memory: u64,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("which_run").required(true).args(["run", "target"])))]
pub struct FetchArgs {
    /// The witness, HOST:PORT.
    #[arg(long)]
    pub witness: String,
    /// Run id (32 hex digits).
    #[arg(long)]
    pub run: Option<String>,
    /// Or: the latest run for the device holding this target.
    #[arg(long, conflicts_with = "run")]
    pub target: Option<PathBuf>,
    /// Output file.
    #[arg(long, short)]
    pub output: PathBuf,
    /// The witness's pre-shared key file (same as `listen --key-file`).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
    /// Print what was fetched as JSON on stdout (run id, ack count, output path).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunsArgs {
    /// The witness, HOST:PORT.
    #[arg(long)]
    pub witness: String,
    /// Print the list as JSON on stdout (`plugpull-runs/1`, docs/protocol.md).
    #[arg(long)]
    pub json: bool,
    /// The witness's pre-shared key file (same as `listen --key-file`).
    #[arg(long, value_name = "PATH")]
    pub key_file: Option<PathBuf>,
}

/// The tables of `plugpull bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchTable {
    /// Sync-write sweep (diskinfo -wS).
    Sweep,
    /// Flush-method table (pg_test_fsync).
    Methods,
    /// Durability cost (iozone -e).
    Durability,
    /// IOPS table (SQLIO).
    Iops,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// A block device or a file: the device tables. A directory: the untar-shaped tree
    /// once per flush method (or, with --in-file, the device tables on bench's own file
    /// in it, `plugpull-bench.tmp`, removed afterwards).
    pub target: PathBuf,
    /// Bytes of the target to use for random offsets [default: 1G, 128M with --quick].
    #[arg(long, allow_hyphen_values = true, value_parser = size)]
    pub size: Option<u64>,
    /// The flush after each write of the sweep [default: fdatasync].
    #[arg(long, value_enum)]
    pub flush: Option<FlushArg>,
    /// Go through the page cache instead of O_DIRECT.
    #[arg(long)]
    pub no_direct: bool,
    /// Time per size in the sweep (and per row of the other tables)
    /// [default: 1s, 0.15s with --quick].
    #[arg(long, value_parser = duration)]
    pub time_per_size: Option<Duration>,
    /// Sizes of the sweep, smallest-largest, doubling [default: sector size-8M].
    #[arg(long, value_parser = size_range)]
    pub sweep_sizes: Option<SizeRange>,
    /// Whole run in about 10 seconds.
    #[arg(long)]
    pub quick: bool,
    /// Also run the IOPS table (SQLIO-like).
    #[arg(long)]
    pub iops: bool,
    /// Run only these tables (comma-separated); default: sweep,methods,durability and,
    /// with --iops, iops.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<BenchTable>,
    /// Block sizes of the IOPS table, comma-separated.
    #[arg(long, value_parser = size, value_delimiter = ',', default_value = "4k,8k,16k,32k,64k")]
    pub block_sizes: Vec<u64>,
    /// Operations of the IOPS table, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "read,write")]
    pub iops_ops: Vec<IopsOpArg>,
    /// Access patterns of the IOPS table, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "sequential,random"
    )]
    pub iops_patterns: Vec<IopsPatternArg>,
    /// Threads (queue depth) for the IOPS table.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Seed for offsets and data (random if not given; printed either way).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Allow overwriting PATH even though it holds data (it must be TARGET itself).
    #[arg(long, value_name = "PATH")]
    pub destroy_data_on: Option<PathBuf>,
    /// Insist on the tree bench: what a directory gets anyway; refused for anything
    /// but a directory (docs/bench.md).
    #[arg(long, conflicts_with = "in_file")]
    pub tree: bool,
    /// For a directory: the device tables on bench's own file in it instead of the tree.
    #[arg(long)]
    pub in_file: bool,
    /// Tree bench: files per run (bytes scale with them; the 53,000-file / 528 MB figure
    /// is extrapolated from this count) [default: 2000, 200 with --quick].
    #[arg(long, value_name = "N")]
    pub files: Option<u32>,
    /// Print the report as JSON on stdout (format in docs/bench.md).
    #[arg(long)]
    pub json: bool,
    /// No progress bar, and no progress lines when stderr is not a terminal.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct CampaignArgs {
    /// The campaign file (TOML; see docs/campaign.md and hardware/examples/).
    #[arg(long)]
    pub config: PathBuf,
    /// Results file (JSON lines), overriding campaign.results. Re-running with the same
    /// file resumes the campaign.
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Run this many cycles in all, overriding campaign.cycles.
    #[arg(long)]
    pub cycles: Option<u64>,
    /// Only print the summary of the results file; cut nothing.
    #[arg(long)]
    pub summary: bool,
    #[command(flatten)]
    pub output: FormatArgs,
    /// No per-cycle lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Verify reports (`verify --json` / `demo --json` output), or JSON-lines files of them
    /// (a campaign). Several reports are shown as the cycles of one campaign.
    #[arg(required = true, value_name = "RESULT.json")]
    pub inputs: Vec<PathBuf>,
    /// The HTML file to write ("-" for stdout).
    #[arg(long, short, default_value = "plugpull-report.html")]
    pub output: PathBuf,
    /// Page title (default: from the device and verdict).
    #[arg(long)]
    pub title: Option<String>,
    /// Print what was rendered as JSON on stdout (verdict, cycles, output path).
    #[arg(long)]
    pub json: bool,
    /// Print nothing on success.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// The agent config (TOML; see docs/campaign.md, whole-host mode).
    #[arg(long, default_value = "/etc/plugpull/agent.toml")]
    pub config: PathBuf,
}

mod depth;
mod format;
mod simulated;
pub use depth::DepthArgs;
pub use format::{FormatArgs, OutputFormat};
pub use simulated::{DemoArgs, SimdriveArgs, SoakArgs};

#[cfg(test)]
mod tests;
