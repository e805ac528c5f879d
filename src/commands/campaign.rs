//! `plugpull campaign`: arguments to options, then the action, then its results on
//! stdout: the summary as text or JSON, or the whole campaign as an OCP test run
//! (`render::ocp_campaign`).

use crate::campaign::CampaignOptions;
use crate::campaign::results::Summary;
use crate::commands::args::{CampaignArgs, OutputFormat};
use crate::commands::render::{self, ocp::Invocation};
use crate::model::Verdict;

pub fn run(a: CampaignArgs) -> anyhow::Result<i32> {
    let format = a.output.resolve().map_err(anyhow::Error::msg)?;
    let inv = Invocation::now(
        "plugpull-campaign",
        serde_json::json!({
            "config": a.config.display().to_string(),
            "results": a.results.as_ref().map(|r| r.display().to_string()),
            "cycles": a.cycles,
            "summary_only": a.summary,
        })
        .as_object()
        .expect("an object literal")
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect(),
    );
    let finished = match crate::campaign::run(CampaignOptions {
        config: a.config.clone(),
        results: a.results,
        cycles: a.cycles,
        summary_only: a.summary,
        quiet: a.quiet,
    }) {
        Ok(f) => f,
        Err(e) => {
            if format == OutputFormat::Ocp {
                render::out(&render::ocp::no_report(
                    &inv,
                    &a.config.display().to_string(),
                    crate::ocp::Status::Error,
                    "campaign-error",
                    &crate::exit::error_chain(&e),
                ));
            }
            return Err(e.into());
        }
    };
    let verdict = verdict(&finished.summary);
    match (format, &finished.fleet) {
        // A fleet's summary is its matrix (docs/fleet.md).
        (OutputFormat::Text, Some(m)) => render::out(&crate::fleet::text::matrix_text(m)),
        (OutputFormat::Json, Some(m)) => println!("{}", serde_json::to_string_pretty(m)?),
        (OutputFormat::Text, None) => render::out(&finished.summary.to_text()),
        (OutputFormat::Json, None) => {
            println!("{}", serde_json::to_string_pretty(&finished.summary)?)
        }
        (OutputFormat::Ocp, _) => {
            render::out(&render::ocp_campaign::campaign(&inv, &finished, verdict))
        }
    }
    Ok(verdict.exit_code())
}

/// The campaign's verdict, its exit status: FAIL when a cycle failed, else ERROR when one
/// went wrong, else INCONCLUSIVE when a cut is not proven or a cycle's verify was
/// inconclusive (nothing lost, but not a pass), else PASS.
fn verdict(s: &Summary) -> Verdict {
    if s.failed > 0 {
        Verdict::Fail
    } else if s.errors > 0 {
        Verdict::Error
    } else if s.cut_not_proven > 0 || s.inconclusive > 0 {
        // Nothing lost, but some cycle proved nothing: not a pass.
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    }
}
