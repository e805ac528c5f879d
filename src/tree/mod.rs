//! The whole-stack mode: files and directories through a file system (issue 14).
//!
//! Why a mode of its own: a drive is rarely the whole story. A file survives a power cut
//! only if the file system journals its inode, its directory entry and the rename that
//! put it in place, and the drive keeps all of that. The untar test (many small files,
//! each durable before it is acknowledged) exercises that whole stack. `plan` says what
//! to create, from one seed; docs/tree.md says what is tested and how.

pub mod plan;
