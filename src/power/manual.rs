//! `driver = "manual"`: a person pulls the plug and presses Enter.
//!
//! Why: the cheapest rig is a hand on a power strip switch. The campaign still records
//! when the operator confirmed each step, and says the timing is not precise.

use super::error::PowerError;
use super::switch::{Capabilities, PowerSwitch, Scope, SwitchTiming};
use std::io::{BufRead, Write};

pub struct ManualSwitch {
    pub scope: Scope,
    input: Box<dyn BufRead + Send>,
    output: Box<dyn Write + Send>,
}

impl ManualSwitch {
    pub fn stdin(scope: Scope) -> ManualSwitch {
        ManualSwitch::new(
            scope,
            Box::new(std::io::BufReader::new(std::io::stdin())),
            Box::new(std::io::stderr()),
        )
    }
    pub fn new(
        scope: Scope,
        input: Box<dyn BufRead + Send>,
        output: Box<dyn Write + Send>,
    ) -> ManualSwitch {
        ManualSwitch {
            scope,
            input,
            output,
        }
    }

    fn ask(&mut self, what: &str) -> Result<SwitchTiming, PowerError> {
        let issued_ns = crate::model::now_ns();
        write!(self.output, "plugpull: {what}, then press Enter: ")?;
        self.output.flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            return Err(PowerError::NoOperator);
        }
        Ok(SwitchTiming {
            issued_ns,
            done_ns: crate::model::now_ns(),
            switch_us: None,
        })
    }
}

impl PowerSwitch for ManualSwitch {
    fn describe(&self) -> String {
        "manual (operator)".into()
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            scope: self.scope,
            precise_timing: false,
            reports_state: false,
            native_pulse: false,
            ramp: false,
            fall_trace: false,
        }
    }
    fn off(&mut self) -> Result<SwitchTiming, PowerError> {
        let what = match self.scope {
            Scope::Drive => "pull the power connector of the drive under test NOW",
            Scope::Host => "pull the power plug of the host under test NOW",
        };
        self.ask(what)
    }
    fn on(&mut self) -> Result<SwitchTiming, PowerError> {
        self.ask("restore power")
    }
}
