//! `plugpull bench`: arguments to [`BenchOptions`] (or, for a directory without
//! `--in-file`, [`bench::tree::TreeBenchOptions`]), then the run; its outcome to an exit
//! code (PASS, or TARGET_FAILED when a row's write or flush failed). The clap-side
//! enums of the bench tables and IOPS table convert here, so `args.rs` imports no bench
//! module.

use crate::bench::config::{Op, Pattern};
use crate::bench::{self, BenchOptions, BenchOutcome, Table};
use crate::commands::args::{BenchArgs, BenchTable, FlushArg, IopsOpArg, IopsPatternArg};
use crate::commands::render::{self, Format};
use crate::exit;

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    if a.tree || (a.target.is_dir() && !a.in_file) {
        refuse_table_options(&a)?;
        let o = tree_options(a);
        let report = bench::tree::run(&o)?;
        render::out(&render::bench::tree(
            Format::from_flags(o.json, false),
            &report,
        )?);
        return Ok(if report.all_ok() {
            exit::PASS
        } else {
            exit::TARGET_FAILED
        });
    }
    if a.in_file && !a.target.is_dir() {
        anyhow::bail!(
            "--in-file is for a directory target: {} is not one (a file or a device gets \
             the device tables without it)",
            a.target.display()
        );
    }
    if a.files.is_some() {
        anyhow::bail!(
            "--files is for the tree bench of a directory; {} gets the device tables",
            a.target.display()
        );
    }
    let o = options(a);
    let report = bench::run(&o)?;
    render::out(&render::bench::tables(
        Format::from_flags(o.json, false),
        &report,
    )?);
    Ok(match bench::outcome(&report)? {
        BenchOutcome::AllRowsOk => exit::PASS,
        BenchOutcome::SomeRowsFailed => exit::TARGET_FAILED,
    })
}

/// A directory gets the tree bench; options that only shape the device tables would be
/// ignored there, so they are refused with the flag that gives the tables instead.
fn refuse_table_options(a: &BenchArgs) -> anyhow::Result<()> {
    let given: Vec<&str> = [
        (a.size.is_some(), "--size"),
        (a.flush.is_some(), "--flush"),
        (a.no_direct, "--no-direct"),
        (a.time_per_size.is_some(), "--time-per-size"),
        (a.sweep_sizes.is_some(), "--sweep-sizes"),
        (a.iops, "--iops"),
        (!a.only.is_empty(), "--only"),
        (a.destroy_data_on.is_some(), "--destroy-data-on"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect();
    if !given.is_empty() {
        anyhow::bail!(
            "{} shape the device tables, but {} is a directory and gets the tree bench \
             (every flush method on an untar-shaped tree); add --in-file for the device \
             tables on a file in it, or drop them",
            given.join(", "),
            a.target.display()
        );
    }
    Ok(())
}

/// The options of the tree bench (`bench DIR`).
pub fn tree_options(a: BenchArgs) -> bench::tree::TreeBenchOptions {
    bench::tree::TreeBenchOptions {
        files: a.files.unwrap_or(if a.quick { 200 } else { 2_000 }),
        dir: a.target,
        seed: a.seed,
        json: a.json,
        quiet: a.quiet,
    }
}

/// The options the command line asks for.
pub fn options(a: BenchArgs) -> BenchOptions {
    BenchOptions {
        target: a.target,
        size_bytes: a.size,
        flush: a.flush.unwrap_or(FlushArg::Fdatasync).into(),
        direct: !a.no_direct,
        time_per_size: a.time_per_size,
        sweep_sizes: a.sweep_sizes,
        quick: a.quick,
        iops: a.iops,
        only: a.only.into_iter().map(Table::from).collect(),
        block_sizes: a.block_sizes,
        iops_ops: a.iops_ops.into_iter().map(Op::from).collect(),
        iops_patterns: a.iops_patterns.into_iter().map(Pattern::from).collect(),
        threads: a.threads,
        seed: a.seed,
        destroy_data_on: a.destroy_data_on,
        json: a.json,
        quiet: a.quiet,
    }
}

impl From<BenchTable> for Table {
    fn from(t: BenchTable) -> Table {
        match t {
            BenchTable::Sweep => Table::Sweep,
            BenchTable::Methods => Table::Methods,
            BenchTable::Durability => Table::Durability,
            BenchTable::Iops => Table::Iops,
        }
    }
}

impl From<IopsOpArg> for Op {
    fn from(a: IopsOpArg) -> Op {
        match a {
            IopsOpArg::Read => Op::Read,
            IopsOpArg::Write => Op::Write,
        }
    }
}

impl From<IopsPatternArg> for Pattern {
    fn from(a: IopsPatternArg) -> Pattern {
        match a {
            IopsPatternArg::Sequential => Pattern::Sequential,
            IopsPatternArg::Random => Pattern::Random,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// Every IOPS operation and pattern the command line offers maps to its own domain
    /// value, and every domain value is offered.
    #[test]
    fn iops_mirrors_cover_the_domain() {
        let ops: Vec<Op> = IopsOpArg::value_variants()
            .iter()
            .map(|&a| a.into())
            .collect();
        assert_eq!(ops, Op::ALL);
        let patterns: Vec<Pattern> = IopsPatternArg::value_variants()
            .iter()
            .map(|&a| a.into())
            .collect();
        assert_eq!(patterns, Pattern::ALL);
        let tables: Vec<Table> = BenchTable::value_variants()
            .iter()
            .map(|&a| a.into())
            .collect();
        assert_eq!(
            tables,
            [Table::Sweep, Table::Methods, Table::Durability, Table::Iops]
        );
    }
}
