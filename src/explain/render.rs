//! An [`Explanation`] as text for people.

use super::staged::{StagedDifference, StagedExplanation};
use super::trace::TraceVerdict;
use super::{query, ConnectionEnd, DirectionAnswer, Explanation, TierRule, Verdict};
use crate::compiler::PortRange;
use std::fmt::Write;

/// `TCP/80`, `UDP/1000-2000`, `SCTP` (every port).
pub(crate) fn port_range(r: &PortRange) -> String {
    let proto = query::protocol_name(r.protocol);
    match (r.first, r.last) {
        (0, u16::MAX) => proto.to_string(),
        (a, b) if a == b => format!("{proto}/{a}"),
        (a, b) => format!("{proto}/{a}-{b}"),
    }
}

/// The explanation in a few lines: the verdict first, then each direction and, for allowed
/// ones, the rules and their flows. `note` (where the compiled state came from) ends it.
pub(crate) fn human(e: &Explanation, note: &str) -> String {
    let mut out = String::new();
    let port = match &e.port {
        Some(p) => match &p.name {
            Some(name) => format!(" {}/{} ({name})", p.protocol, p.port),
            None => format!(" {}/{}", p.protocol, p.port),
        },
        None => " (any port)".to_string(),
    };
    let verdict = if e.allowed { "ALLOWED" } else { "DROPPED" };
    let _ = writeln!(out, "{} -> {}{port}: {verdict}", endpoint(&e.from), endpoint(&e.to));
    for d in [&e.egress, &e.ingress] {
        direction(&mut out, d);
    }
    if !note.is_empty() {
        let _ = writeln!(out, "({note})");
    }
    out
}

fn endpoint(e: &ConnectionEnd) -> String {
    match (e.pod, e.ofport) {
        (true, Some(o)) => format!("{} ({}, port {o})", e.name, e.ip),
        (true, None) => format!("{} ({})", e.name, e.ip),
        (false, _) => e.name.clone(),
    }
}

fn direction(out: &mut String, d: &DirectionAnswer) {
    let head = format!("  {} of {}", d.direction.to_lowercase(), d.endpoint);
    let _ = match &d.verdict {
        Verdict::NotEnforced { reason } => writeln!(out, "{head}: not enforced here ({reason})"),
        Verdict::FromTheNode { reason } => writeln!(out, "{head}: allowed, the node's own connection ({reason})"),
        Verdict::NotIsolated => writeln!(
            out,
            "{head}: allowed (no policy selects it for {}, so it is not isolated)",
            d.direction.to_lowercase()
        ),
        Verdict::Dropped { isolated_by } => {
            writeln!(
                out,
                "{head}: DROPPED: isolated by {}, and no rule of theirs allows this connection",
                isolated_by.join(", ")
            )
        }
        Verdict::DecidedByTier { rule } => {
            let verdict = if rule.action == "Deny" { "DROPPED" } else { "allowed" };
            let _ = writeln!(out, "{head}: {verdict} by {}", tier_rule(rule));
            for f in &rule.flows {
                let _ = writeln!(out, "      {f}");
            }
            Ok(())
        }
        Verdict::Allowed { isolated_by, rules } => {
            let _ = writeln!(out, "{head}: allowed (isolated by {})", isolated_by.join(", "));
            for r in rules {
                let ports = if r.ports.is_empty() { "every port".to_string() } else { r.ports.join(", ") };
                let _ = writeln!(
                    out,
                    "    by {} {} rule {} (conjunction {}, cookie {}, {ports})",
                    r.policy,
                    r.direction.to_lowercase(),
                    r.rule_index,
                    r.conjunction_id,
                    r.cookie
                );
                for f in &r.flows {
                    let _ = writeln!(out, "      {f}");
                }
            }
            Ok(())
        }
    };
    for p in &d.passed {
        let _ = writeln!(out, "    passed on by {}", tier_rule(p));
    }
    if !d.chain.is_empty() {
        let _ = writeln!(out, "    decision chain: {}", d.chain.join(" -> "));
    }
}

/// `ClusterNetworkPolicy <name> rule <name or index> (<tier> tier, priority <n>: <action>;
/// conjunction <id>, cookie <c>)`.
fn tier_rule(r: &TierRule) -> String {
    let rule = r.rule.clone().unwrap_or_else(|| r.rule_index.to_string());
    format!(
        "ClusterNetworkPolicy {} rule {rule} ({} tier, priority {}: {}; conjunction {}, cookie {})",
        r.policy, r.tier, r.policy_priority, r.action, r.conjunction_id, r.cookie
    )
}

/// The staged verdict: its headline (with `WouldDrop` or `WouldAllow` and why when it differs
/// from the enforced one), then each direction as the staged view answers it.
pub fn staged(s: &StagedExplanation) -> String {
    let mut out = String::new();
    let verdict = if s.allowed { "ALLOWED" } else { "DROPPED" };
    let _ = write!(out, "staged view ({}): {verdict}", s.staged_policies.join(", "));
    match &s.difference {
        None => out.push_str(", as enforced\n"),
        Some(d) => {
            let _ = writeln!(out, ": {}", d.as_str());
            let causes = match d {
                StagedDifference::WouldDrop(c) | StagedDifference::WouldAllow(c) => c,
            };
            for c in causes {
                let dir = c.direction.to_lowercase();
                let _ = match d {
                    StagedDifference::WouldDrop(_) => {
                        writeln!(out, "  {dir} would drop, because of staged {}", c.policies.join(", "))
                    }
                    StagedDifference::WouldAllow(_) if c.rules.is_empty() => {
                        writeln!(out, "  {dir} would allow: staged {} no longer isolates it", c.policies.join(", "))
                    }
                    StagedDifference::WouldAllow(_) => {
                        let rules: Vec<String> = c
                            .rules
                            .iter()
                            .map(|r| format!("{} {} rule {}", r.policy, r.direction.to_lowercase(), r.rule_index))
                            .collect();
                        writeln!(out, "  {dir} would allow, by staged {}", rules.join(", "))
                    }
                };
            }
        }
    }
    for d in [&s.egress, &s.ingress] {
        let mut lines = String::new();
        direction(&mut lines, d);
        // The staged view's own compile: its rules' flows are not the bridge's, so only the
        // first line of each rule is shown.
        for l in lines.lines().filter(|l| !l.starts_with("      ")) {
            let _ = writeln!(out, "  {l}");
        }
    }
    out
}

/// OVS's verdict, one line (two when it disagrees).
pub(crate) fn trace(t: &TraceVerdict) -> String {
    let verdict = if t.allowed { "delivers" } else { "drops" };
    let mut out = format!("  datapath (ofproto/trace {}): {verdict} the packet: {}\n", t.flow, t.datapath_actions);
    out.push_str(if t.agrees {
        "  the datapath agrees\n"
    } else {
        "  !!! THE DATAPATH DISAGREES with this explanation !!!\n"
    });
    out
}
