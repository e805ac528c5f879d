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
        (Some(path), _) => Ok(AckSource::File(path)),
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
}
