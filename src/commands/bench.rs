//! `plugpull bench`: arguments to [`BenchOptions`] (or, with `--tree`,
//! [`bench::tree::TreeBenchOptions`]), then the run; its outcome to an exit
//! code (PASS, or TARGET_FAILED when a row's write or flush failed). The clap-side
//! enums of the bench tables and IOPS table convert here, so `args.rs` imports no bench
//! module.

use crate::bench::config::{Op, Pattern};
use crate::bench::{self, BenchOptions, BenchOutcome, Table};
use crate::commands::args::{BenchArgs, BenchTable, IopsOpArg, IopsPatternArg};
use crate::exit;

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    if a.tree {
        let report = bench::tree::run(&tree_options(a))?;
        return Ok(if report.all_ok() {
            exit::PASS
        } else {
            exit::TARGET_FAILED
        });
    }
    Ok(match bench::run(&options(a))? {
        BenchOutcome::AllRowsOk => exit::PASS,
        BenchOutcome::SomeRowsFailed => exit::TARGET_FAILED,
    })
}

/// The options of `bench DIR --tree`.
pub fn tree_options(a: BenchArgs) -> bench::tree::TreeBenchOptions {
    bench::tree::TreeBenchOptions {
        dir: a.target,
        files: a.files,
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
        flush: a.flush.into(),
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
