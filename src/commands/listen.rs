//! `plugpull listen`: arguments to options, then the action.

use crate::commands::args::ListenArgs;
use crate::exit;
use crate::witness::server::{ListenOptions, listen};

pub fn run(a: ListenArgs) -> anyhow::Result<i32> {
    listen(options(a))?;
    Ok(exit::PASS)
}

fn options(a: ListenArgs) -> ListenOptions {
    ListenOptions {
        bind: a.bind,
        dir: a.dir,
        max_connections: a.max_connections,
        idle_timeout: a.idle_timeout,
        handshake_timeout: a.handshake_timeout,
        max_frame_bytes: a.max_frame_bytes,
        key_file: a.key_file,
    }
}
