//! `plugpull listen`: arguments to options, then the action. Without `--dir` the witness
//! keeps its logs in a fixed state directory ([`default_dir`]), never in whatever the
//! current directory happens to be: a witness started from another directory (a reboot,
//! a systemd unit) must find the runs it already holds.

use crate::commands::args::ListenArgs;
use crate::exit;
use crate::witness::server::{ListenOptions, listen};
use std::ffi::OsString;
use std::path::PathBuf;

pub fn run(a: ListenArgs) -> anyhow::Result<i32> {
    listen(options(a)?)?;
    Ok(exit::PASS)
}

fn options(a: ListenArgs) -> anyhow::Result<ListenOptions> {
    let dir = match a.dir {
        Some(d) => d,
        None => default_dir(
            // SAFETY: geteuid has no preconditions.
            unsafe { libc::geteuid() } == 0,
            std::env::var_os("XDG_STATE_HOME"),
            std::env::var_os("HOME"),
        )?,
    };
    Ok(ListenOptions {
        bind: a.bind,
        dir,
        max_connections: a.max_connections,
        idle_timeout: a.idle_timeout,
        handshake_timeout: a.handshake_timeout,
        max_frame_bytes: a.max_frame_bytes,
        key_file: a.key_file,
    })
}

/// The witness directory without `--dir`: /var/lib/plugpull/witness for root (what the
/// systemd unit and the Debian package use), else the XDG state directory
/// ($XDG_STATE_HOME, default ~/.local/state) + plugpull/witness. A relative
/// XDG_STATE_HOME is ignored, as the XDG spec says.
fn default_dir(
    root: bool,
    xdg_state_home: Option<OsString>,
    home: Option<OsString>,
) -> anyhow::Result<PathBuf> {
    if root {
        return Ok(PathBuf::from("/var/lib/plugpull/witness"));
    }
    let state = match xdg_state_home.map(PathBuf::from) {
        Some(x) if x.is_absolute() => x,
        _ => match home.map(PathBuf::from) {
            Some(h) if h.is_absolute() => h.join(".local/state"),
            _ => anyhow::bail!(
                "no --dir, and neither XDG_STATE_HOME nor HOME is an absolute path: pass --dir"
            ),
        },
    };
    Ok(state.join("plugpull/witness"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_uses_var_lib_whatever_the_environment() {
        let d = default_dir(true, Some("/x".into()), Some("/root".into())).unwrap();
        assert_eq!(d, PathBuf::from("/var/lib/plugpull/witness"));
    }

    #[test]
    fn a_user_uses_xdg_state_home_else_home_local_state() {
        let d = default_dir(false, Some("/s".into()), Some("/home/a".into())).unwrap();
        assert_eq!(d, PathBuf::from("/s/plugpull/witness"));
        let d = default_dir(false, None, Some("/home/a".into())).unwrap();
        assert_eq!(d, PathBuf::from("/home/a/.local/state/plugpull/witness"));
        let d = default_dir(false, Some("rel".into()), Some("/home/a".into())).unwrap();
        assert_eq!(d, PathBuf::from("/home/a/.local/state/plugpull/witness"));
        assert!(default_dir(false, None, None).is_err());
    }
}
