//! What can go wrong with a power switch, by meaning, with the message the operator sees.
//!
//! Why one enum for every driver: the campaign handles a failed cut the same way whatever
//! the switch, but the operator needs the driver's own story (which command, which port,
//! which HTTP status) and what to check; each variant carries exactly that.

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

#[derive(Debug, thiserror::Error)]
pub enum PowerError {
    /// An I/O error with nothing to add (the terminal, a poll, a child's status).
    #[error(transparent)]
    Io(#[from] io::Error),

    // The `[power]` table.
    #[error("{what}: {message}")]
    BadDuration { what: String, message: String },
    #[error("power.{which}_request is required for flavor generic (e.g. \"GET /{which}\")")]
    MissingGenericRequest { which: &'static str },
    #[error("power.flavor '{flavor}' is unknown: use shelly-gen1, shelly-gen2, tasmota or generic")]
    UnknownFlavor { flavor: String },
    #[error("power.protocol '{protocol}' is unknown: use plugpull or ch340")]
    UnknownProtocol { protocol: String },
    #[error(
        "power.driver simdrive cuts the simulated drive only: set [target] kind = \"simdrive\""
    )]
    SimdriveWithoutTarget,

    #[error(
        "{switch} cannot ramp a rail down: campaign.fall_times other than 0 need our firmware from version 2 (RAMP), a command switch with power.ramp, or the simulated drive"
    )]
    NoRamp { switch: String },
    #[error("the fall trace from {what}")]
    BadTrace {
        what: String,
        #[source]
        source: super::fall::TraceError,
    },

    // driver = "command".
    #[error("starting `{cmd}`")]
    CommandStart {
        cmd: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "`{cmd}` did not finish within {timeout:?} and was killed: check the switch is reachable, or raise power.timeout"
    )]
    CommandTimedOut { cmd: String, timeout: Duration },
    #[error("`{cmd}` failed ({status}): {stderr}")]
    CommandFailed {
        cmd: String,
        status: ExitStatus,
        /// Trimmed.
        stderr: String,
    },
    #[error("state command `{cmd}` printed {output:?}; it must print on/off (or 1/0)")]
    BadStateOutput { cmd: String, output: String },

    // driver = "http" and "redfish" (the HTTP client under both).
    #[error("{hostport} resolves to no address: check the host name (or give an address)")]
    NoAddress { hostport: String },
    #[error("connecting to {hostport}: is it on the network, and is the port right?")]
    Connect {
        hostport: String,
        #[source]
        source: io::Error,
    },
    #[error("reading the reply of {hostport}")]
    ReadReply {
        hostport: String,
        #[source]
        source: io::Error,
    },
    #[error("the request to {hostport} cannot be made: {message}")]
    BadRequest { hostport: String, message: String },
    #[error("{hostport} did not answer HTTP: {message}")]
    NotHttp { hostport: String, message: String },
    #[error(
        "the TLS certificate of {hostport} was refused ({message}): put the BMC's certificate \
         (or the CA that issued it) in a PEM file and set power.ca_file to it; only on a lab \
         network you trust, power.tls_insecure_accept_any_certificate = true takes any"
    )]
    Certificate { hostport: String, message: String },
    #[error("power.ca_file {}: {message}", path.display())]
    CaFile { path: PathBuf, message: String },
    #[error(
        "{host} refused user '{user}' ({scheme} authentication, 401, realm \"{realm}\"): check \
         power.user and power.password"
    )]
    LoginRefused {
        host: String,
        user: String,
        scheme: &'static str,
        realm: String,
    },
    #[error(
        "{host} asks for HTTP digest authentication with algorithm {algorithm}, which plugpull \
         does not speak (it speaks MD5, SHA-256 and SHA-512-256, and their -sess forms): set \
         the switch to SHA-256"
    )]
    DigestAlgorithm { host: String, algorithm: String },
    #[error("{host} sent a digest challenge plugpull cannot read: {message}")]
    DigestChallenge { host: String, message: String },
    #[error(
        "{host} asks for a login plugpull does not speak (\"{offered}\"); it answers Basic and Digest"
    )]
    AuthScheme { host: String, offered: String },
    #[error(
        "{hostport} did not answer within {timeout:?} (the whole request and reply; power.timeout)"
    )]
    ReplyTimeout { hostport: String, timeout: Duration },
    #[error("the reply of {hostport} passes {max} bytes: not a switch's answer")]
    ReplyTooLong { hostport: String, max: usize },
    #[error(
        "{path} on {host} answered 200 but not as a {flavor} switch does ({expected}); it \
         sent \"{got}\" (a login page or captive portal?)"
    )]
    UnexpectedReply {
        host: String,
        path: String,
        flavor: &'static str,
        expected: &'static str,
        /// The first bytes of the body, escaped.
        got: String,
    },
    #[error("{what} of {value:?} is over the limit of {max:?}")]
    DurationTooLong {
        what: String,
        value: Duration,
        max: Duration,
    },
    #[error("{host} wants a login (401): set power.user and power.password")]
    LoginRequired { host: String },
    #[error(
        "{method} {path} on {host} answered {status}, a redirect to \"{location}\", which \
         plugpull does not follow (credentials would go with it): check power.host and the \
         request's path, or a login page in front of the device"
    )]
    Redirected {
        method: String,
        path: String,
        host: String,
        status: u16,
        /// The Location header, escaped and cut short.
        location: String,
    },
    #[error("{method} {path} on {host} answered {status}: {body}")]
    HttpStatus {
        method: String,
        path: String,
        host: String,
        status: u16,
        /// Trimmed.
        body: String,
    },
    #[error(
        "the switch at {host} answered but reports power {} after being told to turn it {}",
        on_off(*now),
        on_off(*wanted)
    )]
    NotSwitched {
        host: String,
        now: bool,
        wanted: bool,
    },
    #[error(
        "the switch at {host} answered {path} with \"{body}\", which does not say the relay state"
    )]
    NoRelayState {
        host: String,
        path: String,
        body: String,
    },

    // driver = "redfish".
    #[error("{path} on {host} did not answer JSON: \"{body}\"")]
    NotJson {
        host: String,
        path: String,
        body: String,
    },
    #[error(
        "the BMC at {host} made a session but sent no X-Auth-Token: set power.auth = \"basic\""
    )]
    RedfishNoToken { host: String },
    #[error("the BMC at {host} lists no system under /redfish/v1/Systems")]
    RedfishNoSystem { host: String },
    #[error("the BMC at {host} has several systems ({ids}): name the one to cut as power.system")]
    RedfishWhichSystem { host: String, ids: String },
    #[error("the BMC at {host} has no system '{system}' (it has: {ids}): check power.system")]
    RedfishNoSuchSystem {
        host: String,
        system: String,
        ids: String,
    },
    #[error(
        "{system} on {host} does not allow ResetType {reset_type} (it allows: {allowed}); \
         nothing was sent"
    )]
    RedfishResetNotAllowed {
        host: String,
        system: String,
        reset_type: String,
        allowed: String,
    },
    #[error(
        "the BMC at {host} accepted the reset but PowerState still reads {now}, not {want}, \
         after {waited:?} (power.confirm_timeout)"
    )]
    RedfishStateNotReached {
        host: String,
        want: String,
        now: String,
        waited: Duration,
    },
    #[error(
        "the BMC at {host} accepted a PowerCycle but PowerState read On at every poll (every \
         {every:?}) for {waited:?} (power.confirm_timeout): the cycle was not seen, so it is not \
         taken as done (too short to see, or queued and never run)"
    )]
    RedfishCycleNotSeen {
        host: String,
        waited: Duration,
        every: Duration,
    },
    #[error("the BMC at {host} reports PowerState {state}: neither on nor off yet")]
    RedfishTransitional { host: String, state: String },
    #[error(
        "power.ca_file and power.tls_insecure_accept_any_certificate = true contradict each \
         other: keep one"
    )]
    RedfishTrustTwice,
    #[error("power.auth '{auth}' is unknown: use basic or session")]
    UnknownRedfishAuth { auth: String },

    // driver = "serial".
    #[error(
        "opening serial port {port}: is the board plugged in, and are you in the dialout group?"
    )]
    SerialOpen {
        port: String,
        #[source]
        source: io::Error,
    },
    #[error("configuring {port}")]
    SerialConfigure {
        port: String,
        #[source]
        source: Box<PowerError>,
    },
    #[error("power.baud {baud} is not supported: use 9600, 19200, 38400, 57600, 115200 or 230400")]
    UnsupportedBaud { baud: u32 },
    #[error("not a serial port (tcgetattr failed)")]
    NotASerialPort(#[source] io::Error),
    #[error("tcsetattr")]
    SetSerialAttributes(#[source] io::Error),
    #[error(
        "no PING answer from {port}: is hardware/firmware/plugpull_switch flashed, and power.baud right?"
    )]
    NoPing {
        port: String,
        #[source]
        source: Box<PowerError>,
    },
    #[error("no reply from {port} within {timeout:?}")]
    NoReply { port: String, timeout: Duration },
    #[error("{port} closed (board unplugged?)")]
    PortClosed { port: String },
    #[error("reading {port}")]
    SerialRead {
        port: String,
        #[source]
        source: io::Error,
    },
    #[error("writing to {port}")]
    SerialWrite {
        port: String,
        #[source]
        source: io::Error,
    },
    #[error("{port} answered an error: {text}")]
    SwitchRefused { port: String, text: String },
    #[error("STATE? reply {reply:?} has no channel {channel}")]
    NoChannelState { reply: String, channel: u32 },

    // driver = "pcie-slot".
    #[error("no NVMe controller with serial {serial:?} in {}: is the drive in, and the serial as in `nvme list`?", dir.display())]
    NoNvmeWithSerial { serial: String, dir: PathBuf },
    #[error("no hot-plug slot in {} holds {function}: the drive is not in a hot-plug slot (pciehp), or set power.slot", dir.display())]
    NoSlot { function: String, dir: PathBuf },
    #[error(
        "PCIe slot {slot} (drive at {function}) has no power control: the kernel offers no slot power file, or the port's slot capability lacks a power controller. Check `lspci -vv` on the port above the drive: SltCap must say PwrCtrl+ (and HotPlug+); use a switch on the drive's rails instead"
    )]
    NoSlotPowerControl { slot: String, function: String },
    #[error(
        "no NVMe controller with serial {serial:?} came back within {timeout:?} after powering slot {slot} on and rescanning the PCI bus"
    )]
    NvmeNotBack {
        serial: String,
        slot: String,
        timeout: Duration,
    },
    #[error("writing {}: are you root, and is pciehp loaded?", path.display())]
    SysfsWrite {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("reading {}", path.display())]
    SysfsRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    // driver = "manual".
    #[error("the manual power driver needs an operator at the terminal (stdin closed)")]
    NoOperator,

    // driver = "simdrive".
    #[error("reading the recorded fall trace {}", path.display())]
    TraceFile {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cutting the simulated drive")]
    SimCut(#[source] io::Error),
}
