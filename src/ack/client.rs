//! The writer's ack sender and verify's fetch. (Being written.)
use crate::cli::FetchArgs;
pub fn run_fetch(_a: FetchArgs) -> anyhow::Result<()> {
    anyhow::bail!("fetch is not implemented yet")
}
pub fn fetch(_addr: &str, _sel: &super::RunSelector) -> anyhow::Result<super::RunLog> {
    anyhow::bail!("not yet")
}
#[derive(Default)]
pub struct ClientOptions {}
pub struct SenderStats { pub pushed: u64, pub durable: u64, pub connected: bool, pub reconnects: u64, pub last_error: Option<String> }
pub struct AckSender {}
impl AckSender {
    pub fn connect(_addr: &str, _d: &super::RunDescriptor, _o: ClientOptions) -> anyhow::Result<AckSender> { anyhow::bail!("not yet") }
    pub fn push(&self, _a: super::Ack) {}
    pub fn stats(&self) -> SenderStats { SenderStats { pushed: 0, durable: 0, connected: false, reconnects: 0, last_error: None } }
    pub fn finish(self, _t: std::time::Duration) -> anyhow::Result<SenderStats> { Ok(self.stats()) }
}
