//! The read pipeline behind the scan: readers read the span in large aligned chunks, a
//! decoder decodes every sector's stamp and checks its content CRC, and the scan judges
//! the chunks in file order. Why a pipeline: a read is always in flight while the
//! previous chunk is decoded and judged, so verify runs at the device's read bandwidth.
//!
//! READERS readers take alternate chunks, so a read is always in flight while the other's
//! completion is handled (on a 2-vCPU VM a lone reader's completions wait for a CPU the
//! workers use); the decoder does most of the CPU work, in file order. Each reader owns
//! a fixed pool of chunks that come back to it after judging, so nothing is allocated
//! per chunk. The pools must be per reader: with one shared pool a reader running ahead
//! could hold every chunk while the decoder waits for the other reader's next one, a
//! deadlock that the read timeout then reported as unreadable sectors.

use crate::device::{AlignedBuf, Device};
use crate::record::{SECTOR, Stamp, StampError, content_matches, decode_stamp};
use std::sync::{Arc, mpsc};
use std::time::Duration;

pub(super) const CHUNK_BYTES: u64 = 2 << 20;
/// Chunks in circulation per reader.
pub(super) const POOL: usize = 3;
/// Chunks per reader when the reads start before the judging can (`super::read_early`):
/// 128 MiB read ahead while verify's first pass over the acks runs.
pub(super) const EARLY_POOL: usize = 32;
const READERS: usize = 2;

/// Test support (Cargo.toml's test-support feature, not in the shipped binary): when set,
/// no chunk buffer can be allocated (`all`), or none for reading ahead of the first pass
/// (`ahead`), or none after the first N (`after:N`: memory that runs out part way, in a
/// later part of a run judged in parts or a later state of a replay), so a test can run
/// the command itself and see what verify does without the memory for its reads (an
/// environment variable because the test runs the binary, and no flag of the shipped
/// command line should exist for it).
#[cfg(feature = "test-support")]
pub const NO_READ_BUFFERS: &str = "PLUGPULL_TEST_NO_READ_BUFFERS";

/// An out-of-memory error when [`NO_READ_BUFFERS`] refuses these buffers (`ahead`: the
/// buffers of reads ahead of the first pass; else one buffer's allocation).
#[cfg(feature = "test-support")]
pub fn starved_by_test(ahead: bool) -> std::io::Result<()> {
    static ALLOCATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let starved = std::env::var(NO_READ_BUFFERS).unwrap_or_default();
    let after = starved.strip_prefix("after:").map(|n| {
        n.parse::<u64>()
            .unwrap_or_else(|_| panic!("{NO_READ_BUFFERS}={starved}: expected after:N"))
    });
    match (starved.as_str(), after) {
        ("all", _) => {}
        ("ahead", _) if ahead => {}
        (_, Some(n))
            if !ahead && ALLOCATED.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= n => {}
        _ => return Ok(()),
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::OutOfMemory,
        format!("out of memory ({NO_READ_BUFFERS} is set)"),
    ))
}

/// One chunk of the span, read and decoded.
pub(super) struct Chunk {
    pub offset: u64,
    /// Its place among the pipeline's chunks (which reader owns it).
    pub index: usize,
    /// Bytes of `buf` in use (the last chunk may be short).
    pub len: usize,
    pub buf: AlignedBuf,
    /// Ranges that failed to read: (offset, len, reason).
    pub bad: Vec<(u64, u64, String)>,
    /// How long its read took, in ns.
    pub read_ns: u64,
    /// Each sector's decoded stamp, and whether its content matches the stamp's CRC.
    pub stamps: Vec<Result<Stamp, StampError>>,
    pub content_ok: Vec<bool>,
}

/// The running readers and decoder of one scan.
pub(super) struct Pipeline {
    /// What it reads: (start, readable_end, block) as given to [`Pipeline::start`].
    pub(super) reads: (u64, u64, u64),
    from_decoder: mpsc::Receiver<Chunk>,
    /// Per reader: where its chunks go back after judging.
    give_backs: Vec<mpsc::Sender<Chunk>>,
    /// Per reader: the read it is in (`Pipeline::next` times reads from their start).
    clocks: Arc<Vec<ReadClock>>,
    /// Chunks handed out so far: the index of the next one.
    taken: std::cell::Cell<usize>,
    /// When the readers started: the clocks' zero.
    born: std::time::Instant,
}

/// The read a reader is in, and since when. Why: a read is hung when it takes longer
/// than `read_timeout` from its submission, however long the judge took to ask for it;
/// a scan whose reads start at another moment (a run judged in parts, each part with a
/// pipeline of its own; reads started before the first pass) meets a slow read the same
/// way.
struct ReadClock {
    /// The chunk index being read; `usize::MAX` before the first.
    index: std::sync::atomic::AtomicUsize,
    /// When that read was submitted, in ns since the pipeline started.
    started_ns: std::sync::atomic::AtomicU64,
    /// Whether that read has completed (the chunk is with the decoder or judged).
    done: std::sync::atomic::AtomicBool,
}

impl Pipeline {
    /// Starts reading [start, readable_end) of `dev` in chunks of whole `block`s, with
    /// `pool` chunks per reader (reads ahead of the judging).
    pub fn start(
        dev: Arc<dyn Device>,
        start: u64,
        readable_end: u64,
        block: u64,
        pool: usize,
    ) -> std::io::Result<Pipeline> {
        let runs = Arc::new(vec![(start, readable_end.max(start))]);
        let mut p = Pipeline::start_runs(dev, runs, block, pool)?;
        p.reads = (start, readable_end, block);
        Ok(p)
    }

    /// Starts reading `runs` of `dev` (sorted, disjoint, whole `block`s each, within the
    /// device), chunk after chunk, no chunk crossing the end of a run: only the bytes
    /// that hold records are read when they are sparse in their span (`super::Reads`).
    /// An error, before any read starts, when the chunks' buffers cannot be allocated or
    /// a reader thread cannot be started: verify stops with it (exit 2, no verdict)
    /// instead of aborting, as a failed allocation would.
    pub fn start_runs(
        dev: Arc<dyn Device>,
        runs: Arc<Vec<(u64, u64)>>,
        block: u64,
        pool: usize,
    ) -> std::io::Result<Pipeline> {
        // No chunk is longer than the widest run: a small run (a test's few sectors)
        // does not allocate and zero 12 MiB of buffers on every verify.
        let widest = runs.iter().map(|&(s, e)| e - s).max().unwrap_or(0);
        let n = CHUNK_BYTES.min(widest) as usize;
        let chunks = (0..READERS * pool)
            .map(|_| empty_chunk(n))
            .collect::<std::io::Result<Vec<Chunk>>>()
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "verify cannot allocate its read buffers ({} chunks of {}): {e}",
                        READERS * pool,
                        crate::units::fmt_bytes(n as u64)
                    ),
                )
            })?;
        let mut chunks = chunks.into_iter();
        let (to_judge, from_decoder) = mpsc::sync_channel::<Chunk>(pool);
        let mut from_readers = vec![];
        let mut give_backs = vec![];
        let born = std::time::Instant::now();
        let clocks: Arc<Vec<ReadClock>> = Arc::new(
            (0..READERS)
                .map(|_| ReadClock {
                    index: usize::MAX.into(),
                    started_ns: 0.into(),
                    done: true.into(),
                })
                .collect(),
        );
        for k in 0..READERS {
            let (to_decoder, from_reader) = mpsc::sync_channel::<Chunk>(pool);
            let (give_back, recycled) = mpsc::channel::<Chunk>();
            for c in chunks.by_ref().take(pool) {
                give_back.send(c).expect("fresh channel");
            }
            from_readers.push(from_reader);
            give_backs.push(give_back);
            let clock = (clocks.clone(), born);
            spawn_reader(
                dev.clone(),
                runs.clone(),
                k,
                block,
                recycled,
                to_decoder,
                clock,
            )?;
        }
        spawn_decoder(from_readers, to_judge)?;
        let (start, end) = match (runs.first(), runs.last()) {
            (Some(f), Some(l)) => (f.0, l.1),
            _ => (0, 0),
        };
        Ok(Pipeline {
            reads: (start, end, block),
            from_decoder,
            give_backs,
            clocks,
            taken: 0.into(),
            born,
        })
    }

    /// The next chunk in file order; None if its read has not completed `timeout` after
    /// it was submitted (`ReadClock`).
    pub fn next(&self, timeout: Duration) -> Option<Chunk> {
        use std::sync::atomic::Ordering::Acquire;
        let i = self.taken.get();
        let clock = &self.clocks[i % READERS];
        let asked = std::time::Instant::now();
        loop {
            // Until the read's deadline if it is under way; a while otherwise (not yet
            // submitted, or completed and being decoded: no deadline applies).
            let now_ns = self.born.elapsed().as_nanos() as u64;
            let in_read = clock.index.load(Acquire) == i && !clock.done.load(Acquire);
            let wait = match in_read {
                true => {
                    let due = clock.started_ns.load(Acquire) + timeout.as_nanos() as u64;
                    Duration::from_nanos(due.saturating_sub(now_ns))
                }
                false => timeout.min(Duration::from_millis(20)),
            };
            match self.from_decoder.recv_timeout(wait) {
                // A read that took longer than the timeout is hung, even if it was done
                // by the time it was asked for.
                Ok(c) if c.read_ns > timeout.as_nanos() as u64 => return None,
                Ok(c) => {
                    self.taken.set(i + 1);
                    return Some(c);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
                Err(mpsc::RecvTimeoutError::Timeout) if in_read => {
                    // Hung if that read is still the one under way, past its deadline.
                    let still = clock.index.load(Acquire) == i && !clock.done.load(Acquire);
                    let started = clock.started_ns.load(Acquire);
                    let now_ns = self.born.elapsed().as_nanos() as u64;
                    if still && now_ns >= started + timeout.as_nanos() as u64 {
                        return None;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // A read that never even started (its reader stuck before it) is
                    // given up as the judge's own wait runs out, as before reads were
                    // timed: never waited for without end.
                    let started = clock.index.load(Acquire).wrapping_add(1) > i;
                    if !started && asked.elapsed() >= timeout {
                        return None;
                    }
                }
            }
        }
    }

    /// Gives a judged chunk back to the reader that owns it (reader k reads chunks k,
    /// k+READERS, ...).
    pub fn recycle(&self, c: Chunk) {
        let owner = c.index % READERS;
        let _ = self.give_backs[owner].send(c);
    }
}

/// A chunk of `n` bytes, its buffers allocated; an error when the memory cannot be had.
pub(super) fn empty_chunk(n: usize) -> std::io::Result<Chunk> {
    #[cfg(feature = "test-support")]
    starved_by_test(false)?;
    let buf = AlignedBuf::try_new(n)?;
    let (mut stamps, mut content_ok) = (Vec::new(), Vec::new());
    let no_memory = |_| {
        std::io::Error::new(
            std::io::ErrorKind::OutOfMemory,
            format!("cannot allocate the sector table of a {n}-byte chunk: out of memory"),
        )
    };
    stamps.try_reserve_exact(n / SECTOR).map_err(no_memory)?;
    content_ok
        .try_reserve_exact(n / SECTOR)
        .map_err(no_memory)?;
    Ok(Chunk {
        offset: 0,
        index: 0,
        len: 0,
        buf,
        bad: vec![],
        read_ns: 0,
        stamps,
        content_ok,
    })
}

/// The chunks of `runs` in file order: (offset, len), none crossing the end of a run or
/// a multiple of [`CHUNK_BYTES`] of the device. Why the device's grid, not the run's:
/// every scan of the same bytes then reads the same chunks, wherever it starts, so a run
/// judged in parts (`verify::partition`, its parts' edges on this grid) meets a hung or
/// failed read exactly where the whole run would.
pub(super) fn chunks_of(runs: &[(u64, u64)]) -> impl Iterator<Item = (u64, u64)> + '_ {
    runs.iter().flat_map(|&(s, e)| {
        std::iter::successors((s < e).then_some(s), move |&at| {
            let next = (at / CHUNK_BYTES + 1) * CHUNK_BYTES;
            (next < e).then_some(next)
        })
        .map(move |at| (at, ((at / CHUNK_BYTES + 1) * CHUNK_BYTES).min(e) - at))
    })
}

/// A reader: chunks `k`, `k + READERS`, ... of `runs` ([`chunks_of`]).
fn spawn_reader(
    dev: Arc<dyn Device>,
    runs: Arc<Vec<(u64, u64)>>,
    k: usize,
    block: u64,
    recycled: mpsc::Receiver<Chunk>,
    to_decoder: mpsc::SyncSender<Chunk>,
    (clocks, born): (Arc<Vec<ReadClock>>, std::time::Instant),
) -> std::io::Result<()> {
    use std::sync::atomic::Ordering::Release;
    // Not scoped threads: if a read hangs we must be able to walk away from it.
    let spawned = std::thread::Builder::new()
        .name("verify-read".into())
        .spawn(move || {
            let dev = &*dev;
            let clock = &clocks[k];
            let mine = chunks_of(&runs).enumerate().skip(k).step_by(READERS);
            for (index, (at, len)) in mine {
                let Ok(mut c) = recycled.recv() else { return };
                c.offset = at;
                c.index = index;
                c.len = len as usize;
                clock.done.store(false, Release);
                let started_ns = born.elapsed().as_nanos() as u64;
                clock.started_ns.store(started_ns, Release);
                clock.index.store(index, Release);
                c.bad = read_chunk(dev, &mut c.buf[..c.len], at, block);
                c.read_ns = born.elapsed().as_nanos() as u64 - started_ns;
                clock.done.store(true, Release);
                if to_decoder.send(c).is_err() {
                    return;
                }
            }
        });
    spawned.map(drop).map_err(no_thread)
}

/// The error of a reader or decoder thread the system would not start.
pub(super) fn no_thread(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("verify cannot start a thread of its read pipeline: {e}"),
    )
}

/// The decoder: takes the readers' chunks in turn (so in file order), decodes stamps and
/// checks content CRCs.
fn spawn_decoder(
    from_readers: Vec<mpsc::Receiver<Chunk>>,
    to_judge: mpsc::SyncSender<Chunk>,
) -> std::io::Result<()> {
    let spawned = std::thread::Builder::new()
        .name("verify-decode".into())
        .spawn(move || {
            // Chunks come back in file order: reader k holds chunks k, k+READERS, ...
            for turn in 0.. {
                let Ok(mut c) = from_readers[turn % READERS].recv() else {
                    return;
                };
                decode(&mut c);
                if to_judge.send(c).is_err() {
                    return;
                }
            }
        });
    spawned.map(drop).map_err(no_thread)
}

/// Decodes every sector's stamp of `c` and checks its content CRC.
pub(super) fn decode(c: &mut Chunk) {
    c.stamps.clear();
    c.stamps
        .extend(c.buf[..c.len].chunks_exact(SECTOR).map(decode_stamp));
    c.content_ok.clear();
    let ok = c.buf[..c.len]
        .chunks_exact(SECTOR)
        .zip(&c.stamps)
        .map(|(sec, st)| st.as_ref().is_ok_and(|s| content_matches(sec, s)));
    c.content_ok.extend(ok);
}

/// Reads one chunk; on error, narrows down to the failing blocks so one bad sector does
/// not hide a whole chunk.
pub(super) fn read_chunk(
    dev: &dyn Device,
    buf: &mut [u8],
    offset: u64,
    block: u64,
) -> Vec<(u64, u64, String)> {
    if dev.read_at(buf, offset).is_ok() {
        return vec![];
    }
    if let Some(why) = dev.gone() {
        buf.fill(0);
        return vec![(offset, buf.len() as u64, why)];
    }
    let mut bad = vec![];
    let piece = (64 * 1024).max(block) as usize;
    for (k, part) in buf.chunks_mut(piece).enumerate() {
        let po = offset + (k * piece) as u64;
        if dev.read_at(part, po).is_ok() {
            continue;
        }
        for (j, b) in part.chunks_mut(block as usize).enumerate() {
            let bo = po + j as u64 * block;
            if let Err(e) = dev.read_at(b, bo) {
                // The buffer is recycled: leave nothing of an earlier chunk in it to be
                // mistaken for data found here.
                b.fill(0);
                match bad.last_mut() {
                    Some((o, l, r)) if *o + *l == bo && *r == e.to_string() => *l += block,
                    _ => bad.push((bo, block, e.to_string())),
                }
            }
        }
    }
    bad
}

pub(super) fn block_of(dev: &dyn Device) -> u64 {
    dev.logical_block_bytes().max(512) as u64
}

pub(super) fn dev_end(dev: &dyn Device, block: u64) -> u64 {
    dev.size_bytes() / block * block
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk whose memory cannot be had is an error that says so, not an abort of the
    /// process (a test process that aborted would fail every test with it).
    #[test]
    fn a_chunk_without_memory_is_an_error() {
        let e = empty_chunk(1 << 62).err().expect("no 4 EiB chunk");
        assert!(e.to_string().contains("cannot map an I/O buffer"), "{e}");
        let c = empty_chunk(CHUNK_BYTES as usize).expect("a 2 MiB chunk");
        assert_eq!(c.buf.len(), CHUNK_BYTES as usize);
        assert!(c.stamps.capacity() >= CHUNK_BYTES as usize / SECTOR);
    }
}
