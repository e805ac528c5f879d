//! The tree workload as a pure plan: which directories and files an untar-shaped run
//! creates, in which order, how big each file is, which files arrive by a rename into
//! place and which later overwrite an earlier one.
//!
//! Why a plan apart from the writer: one seed must reproduce the whole tree (a failing
//! cut is replayed with the same seed, and the file-system tests scale the same shape
//! down), and the shape must be checkable without touching a disk. The writer
//! (`tree::write`) only executes steps; nothing here does I/O.
//!
//! The shape follows the untar test the project started from (53,000 files, 528 MB):
//! directories 2 to 6 levels below the tree root hold the files; most files are 1-16 KiB
//! (log-uniform), a few large ones (64 KiB to 8 MiB) carry the rest of the bytes; a few files are written
//! under a temporary name and renamed into place (as package managers do), and a few
//! overwrite a file written earlier (in place, or by an atomic rename over it, as editors
//! do). File sizes are whole 512-byte sectors because every sector carries a stamp.

use crate::record::SECTOR;
use crate::rng::Rng;

/// How much the tree holds. [`TreeScale::UNTAR`] is the seeds' source tree; tests and
/// quick runs use [`TreeScale::scaled_down`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeScale {
    /// Files created (overwrites come on top of these).
    pub files: u32,
    /// Bytes of all created files together (approximately: sizes are drawn).
    pub total_bytes: u64,
}

impl TreeScale {
    /// The untar test of the seeds: 53,000 files, 528 MB.
    pub const UNTAR: TreeScale = TreeScale {
        files: 53_000,
        total_bytes: 528_000_000,
    };

    /// The untar shape with `files` files and the same mean bytes per file.
    pub fn scaled_down(files: u32) -> TreeScale {
        let per_file = Self::UNTAR.total_bytes / Self::UNTAR.files as u64;
        TreeScale {
            files,
            total_bytes: per_file * files as u64,
        }
    }
}

/// The smallest and largest "small" file, in sectors (1 KiB and 16 KiB).
pub const SMALL_SECTORS_MIN: u32 = 2;
pub const SMALL_SECTORS_MAX: u32 = 32;
/// Large files: from 64 KiB up to this many sectors (8 MiB).
pub const LARGE_SECTORS_MIN: u32 = 128;
pub const LARGE_SECTORS_MAX: u32 = 16_384;
/// Share of created files written under a temporary name and renamed into place.
pub const RENAME_SHARE: f64 = 0.03;
/// Overwrites of an earlier file, as a share of created files.
pub const OVERWRITE_SHARE: f64 = 0.02;
/// Directory depth of the directories that hold files (levels below the tree root).
pub const DEPTH_MIN: u32 = 2;
pub const DEPTH_MAX: u32 = 6;
/// Mean files per directory (a kernel source tree has about 12).
pub const FILES_PER_DIR: u32 = 12;

/// How a file version reaches its final name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Created (or truncated, for an overwrite) and written under its final name.
    InPlace,
    /// Written under `tmp` (same directory), made durable, then renamed to the final
    /// name; for an overwrite the rename replaces the older version atomically.
    Renamed { tmp: String },
}

/// One version of one file. `id` is unique within the run, is the `seq` of every sector
/// stamp of the file's content, and names the file in its ack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileStep {
    pub id: u64,
    /// Final path relative to the tree root, '/'-separated.
    pub path: String,
    pub sectors: u32,
    pub arrival: Arrival,
    /// The id of the version this one overwrites (same path), if any.
    pub replaces: Option<u64>,
}

impl FileStep {
    pub fn len_bytes(&self) -> u64 {
        self.sectors as u64 * SECTOR as u64
    }
    /// The directory part of `path` ("" for the root).
    pub fn dir(&self) -> &str {
        parent_of(&self.path)
    }
}

/// One step of the run, executed in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Create this directory (its parent exists already).
    MkDir(String),
    File(FileStep),
}

/// The whole workload of one seed and scale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreePlan {
    pub seed: u64,
    pub scale: TreeScale,
    pub steps: Vec<Step>,
}

/// The directory part of a '/'-separated relative path ("" at the top).
pub fn parent_of(path: &str) -> &str {
    path.rfind('/').map(|i| &path[..i]).unwrap_or("")
}

const EXTENSIONS: [&str; 6] = ["c", "h", "txt", "S", "rs", "mk"];

/// Builds the plan. The same seed and scale give the same plan, step for step.
pub fn plan(seed: u64, scale: TreeScale) -> TreePlan {
    let mut root = Rng::new(seed);
    let mut dir_rng = root.fork(1);
    let mut size_rng = root.fork(2);
    let mut how_rng = root.fork(3);

    let dirs = plan_dirs(&mut dir_rng, scale.files);
    // Files go only into directories deep enough; each such directory gets a share.
    let holders: Vec<usize> = (0..dirs.len())
        .filter(|&i| dirs[i].depth >= DEPTH_MIN)
        .collect();
    let mut files_in: Vec<u32> = vec![0; dirs.len()];
    for _ in 0..scale.files {
        let d = holders[dir_rng.below(holders.len() as u64) as usize];
        files_in[d] += 1;
    }
    let sizes = plan_sizes(&mut size_rng, scale);

    let mut steps = Vec::new();
    let mut written: Vec<(u64, String)> = Vec::new();
    let mut next_id = 1u64;
    let mut sizes = sizes.into_iter();
    let overwrites = (scale.files as f64 * OVERWRITE_SHARE).round() as u64;
    // Spread the overwrites over the run: one is due every `gap` created files.
    let gap = (scale.files as u64)
        .checked_div(overwrites)
        .map_or(u64::MAX, |g| g.max(1));
    let mut overwrites_left = overwrites;
    for (d, dir) in dirs.iter().enumerate() {
        steps.push(Step::MkDir(dir.path.clone()));
        for n in 0..files_in[d] {
            let ext = EXTENSIONS[how_rng.below(EXTENSIONS.len() as u64) as usize];
            let name = format!("f{n}.{ext}");
            let path = format!("{}/{}", dir.path, name);
            let arrival = if how_rng.chance(RENAME_SHARE) {
                Arrival::Renamed {
                    tmp: format!("{}/.{}.tmp{}", dir.path, name, next_id),
                }
            } else {
                Arrival::InPlace
            };
            let sectors = sizes.next().expect("one size per file");
            steps.push(Step::File(FileStep {
                id: next_id,
                path: path.clone(),
                sectors,
                arrival,
                replaces: None,
            }));
            written.push((next_id, path));
            next_id += 1;
            if overwrites_left > 0 && written.len() as u64 % gap == 0 {
                overwrites_left -= 1;
                let step = overwrite(&mut how_rng, &mut size_rng, &mut written, next_id);
                steps.push(Step::File(step));
                next_id += 1;
            }
        }
    }
    while overwrites_left > 0 && !written.is_empty() {
        overwrites_left -= 1;
        let step = overwrite(&mut how_rng, &mut size_rng, &mut written, next_id);
        steps.push(Step::File(step));
        next_id += 1;
    }
    TreePlan { seed, scale, steps }
}

/// A new version of a random earlier file; `written` then names the new version.
fn overwrite(how: &mut Rng, size: &mut Rng, written: &mut [(u64, String)], id: u64) -> FileStep {
    let pick = how.below(written.len() as u64) as usize;
    let (old, path) = written[pick].clone();
    let arrival = if how.chance(0.5) {
        let name = &path[path.rfind('/').map(|i| i + 1).unwrap_or(0)..];
        Arrival::Renamed {
            tmp: format!("{}/.{}.tmp{}", parent_of(&path), name, id),
        }
    } else {
        Arrival::InPlace
    };
    written[pick].0 = id;
    FileStep {
        id,
        path,
        sectors: size.range(SMALL_SECTORS_MIN as u64, SMALL_SECTORS_MAX as u64) as u32,
        arrival,
        replaces: Some(old),
    }
}

struct PlannedDir {
    path: String,
    depth: u32,
}

/// Directories in creation order (every parent before its children), about one per
/// [`FILES_PER_DIR`] files, with at least one chain down to [`DEPTH_MAX`] and none
/// deeper. Depth 1 is a top-level directory such as `linux/`.
fn plan_dirs(rng: &mut Rng, files: u32) -> Vec<PlannedDir> {
    let want = (files / FILES_PER_DIR).max(1) as usize + DEPTH_MAX as usize;
    let mut dirs: Vec<PlannedDir> = Vec::with_capacity(want);
    let mut children: Vec<u32> = Vec::with_capacity(want);
    // The guaranteed chain: t0, t0/d0, ... down to DEPTH_MAX.
    for depth in 1..=DEPTH_MAX {
        let path = match dirs.last() {
            None => "t0".to_string(),
            Some(p) => format!("{}/d0", p.path),
        };
        if let Some(c) = children.last_mut() {
            *c += 1;
        }
        dirs.push(PlannedDir { path, depth });
        children.push(0);
    }
    let mut tops = 1u32;
    while dirs.len() < want {
        // A new top-level directory now and then; otherwise a child of a directory
        // that is not yet at the deepest level, leaning towards recent ones (untar order).
        if rng.chance(0.02) {
            dirs.push(PlannedDir {
                path: format!("t{tops}"),
                depth: 1,
            });
            children.push(0);
            tops += 1;
            continue;
        }
        let recent = dirs.len().min(64) as u64;
        let p = dirs.len() - 1 - rng.below(recent) as usize;
        if dirs[p].depth >= DEPTH_MAX {
            continue;
        }
        let path = format!("{}/d{}", dirs[p].path, children[p]);
        children[p] += 1;
        let depth = dirs[p].depth + 1;
        dirs.push(PlannedDir { path, depth });
        children.push(0);
    }
    // Creation order: parents first; depth-first like a tar listing.
    dirs.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
    dirs
}

/// One size (in sectors) per created file: small ones log-uniform over 1-16 KiB (most
/// source files are a few KiB), and as many large ones, log-uniform over 64 KiB-8 MiB
/// and then scaled together, as it takes to bring the total to `scale.total_bytes`.
fn plan_sizes(rng: &mut Rng, scale: TreeScale) -> Vec<u32> {
    let n = scale.files as u64;
    let small_mean_bytes = log_uniform_mean(SMALL_SECTORS_MIN, SMALL_SECTORS_MAX) * SECTOR as f64;
    let large_mean_bytes = log_uniform_mean(LARGE_SECTORS_MIN, LARGE_SECTORS_MAX) * SECTOR as f64;
    let left = scale.total_bytes as f64 - n as f64 * small_mean_bytes;
    let large_n = ((left.max(0.0) / large_mean_bytes).round() as u64).min(n);
    let mut sizes: Vec<u32> = (0..n)
        .map(|_| log_uniform(rng, SMALL_SECTORS_MIN, SMALL_SECTORS_MAX))
        .collect();
    if large_n == 0 {
        return sizes;
    }
    // Large files at evenly spread, seed-chosen positions (selection sampling).
    let mut picked = Vec::with_capacity(large_n as usize);
    for i in 0..n {
        if rng.below(n - i) < large_n - picked.len() as u64 {
            picked.push(i as usize);
        }
    }
    let drawn: Vec<f64> = picked
        .iter()
        .map(|_| log_uniform(rng, LARGE_SECTORS_MIN, LARGE_SECTORS_MAX) as f64)
        .collect();
    let small_sum: u64 = picked.iter().map(|&i| sizes[i] as u64).sum();
    let small_total: u64 = sizes.iter().map(|&s| s as u64).sum::<u64>() - small_sum;
    let want_sectors = (scale.total_bytes / SECTOR as u64).saturating_sub(small_total) as f64;
    let factor = want_sectors / drawn.iter().sum::<f64>();
    for (&i, d) in picked.iter().zip(drawn) {
        sizes[i] = (d * factor)
            .round()
            .clamp(LARGE_SECTORS_MIN as f64, LARGE_SECTORS_MAX as f64) as u32;
    }
    sizes
}

/// A draw from `lo..=hi` whose logarithm is uniform: many small values, a long tail.
fn log_uniform(rng: &mut Rng, lo: u32, hi: u32) -> u32 {
    let u = rng.below(1 << 53) as f64 / (1u64 << 53) as f64;
    // libm, not f64::ln/exp: the platform's libm may round differently (see Cargo.toml).
    let (l, h) = (libm::log(lo as f64), libm::log(hi as f64 + 1.0));
    (libm::floor(libm::exp(l + u * (h - l))) as u32).clamp(lo, hi)
}

/// The mean of [`log_uniform`] over `lo..=hi` (continuous approximation).
fn log_uniform_mean(lo: u32, hi: u32) -> f64 {
    let (lo, hi) = (lo as f64, hi as f64 + 1.0);
    (hi - lo) / libm::log(hi / lo)
}

impl TreePlan {
    /// Every file step, in order.
    pub fn files(&self) -> impl Iterator<Item = &FileStep> {
        self.steps.iter().filter_map(|s| match s {
            Step::File(f) => Some(f),
            Step::MkDir(_) => None,
        })
    }
    /// Bytes of every file version written.
    pub fn bytes(&self) -> u64 {
        self.files().map(|f| f.len_bytes()).sum()
    }
}

#[cfg(test)]
mod tests;
