//! The two arguments every command that judges a run shares (`verify`, `replay`): which
//! run (`--run`) and where its acks come from (`--acks FILE` or `--witness HOST:PORT`),
//! parsed once so both commands word their errors alike.

use crate::record::RunId;
use crate::verify::AckSource;
use anyhow::Context;
use std::path::PathBuf;

/// `--run`: None when absent; an error naming the flag if it is not a run id.
pub fn run_id(arg: Option<&str>) -> anyhow::Result<Option<RunId>> {
    arg.map(|r| {
        RunId::parse(r).with_context(|| format!("--run '{r}' is not a run id (32 hex digits)"))
    })
    .transpose()
}

/// `--acks` wins over `--witness`; one of them is required.
pub fn ack_source(acks: Option<PathBuf>, witness: Option<String>) -> anyhow::Result<AckSource> {
    match (acks, witness) {
        (Some(path), _) => {
            // A device or pipe is no ack log: refused here rather than read without end
            // (`--acks /dev/zero`). Checked by name only: this guards against a mistake,
            // the log's reader checks what it reads.
            if let Ok(m) = std::fs::metadata(&path)
                && !m.is_file()
                && !m.is_dir()
            {
                anyhow::bail!(
                    "--acks {}: not a regular file; give the ack log `plugpull fetch -o` or the witness wrote",
                    path.display()
                );
            }
            Ok(AckSource::File(path))
        }
        (None, Some(addr)) => Ok(AckSource::Witness(addr)),
        (None, None) => anyhow::bail!("--witness or --acks is required"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_and_ack_sources_parse_or_say_which_flag_is_wrong() {
        assert_eq!(run_id(None).unwrap(), None);
        let hex = "0123456789abcdef0123456789abcdef";
        assert_eq!(run_id(Some(hex)).unwrap().unwrap().hex(), hex);
        let e = run_id(Some("xyz")).unwrap_err();
        assert!(
            format!("{e:#}").contains("--run 'xyz' is not a run id"),
            "{e:#}"
        );
        assert!(matches!(
            ack_source(Some("a".into()), Some("w:1".into())).unwrap(),
            AckSource::File(_)
        ));
        assert!(matches!(
            ack_source(None, Some("w:1".into())).unwrap(),
            AckSource::Witness(_)
        ));
        let e = ack_source(None, None).unwrap_err();
        assert!(e.to_string().contains("--witness or --acks"), "{e}");
    }

    #[test]
    fn verify_acks_dev_zero_is_refused_unread() {
        // /dev/null stands for /dev/zero: the same kind of file, and nothing to fill
        // memory with on a build that reads it.
        let e = ack_source(Some("/dev/null".into()), None).unwrap_err();
        assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
        let d = tempfile::tempdir().unwrap();
        assert!(ack_source(Some(d.path().join("run.acklog")), None).is_ok());
    }
}
