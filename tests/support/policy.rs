//! NetworkPolicy manifests for the testbed's pods (each labelled `pod: <name>`), built from
//! the parts the tests vary: the selected pods, the peer pod and the ports.

/// A NetworkPolicy `namespace/name` whose `podSelector` is `pod_selector` (flow YAML:
/// [`pod_selector`], `{}`, a `matchExpressions` selector) and whose other spec fields are
/// `spec` (YAML lines indented two spaces, as [`ingress_from_pod`] writes them).
pub fn network_policy(namespace: &str, name: &str, pod_selector: &str, spec: &str) -> String {
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {{namespace: {namespace}, name: {name}}}\n\
         spec:\n  podSelector: {pod_selector}\n{spec}"
    )
}

/// The selector of the testbed pod(s) labelled `pod: <pod>`: `{matchLabels: {pod: a}}`.
pub fn pod_selector(pod: &str) -> String {
    format!("{{matchLabels: {{pod: {pod}}}}}")
}

/// Spec lines allowing ingress from the pods labelled `pod: <from>` on `ports` (`("TCP", 80)`;
/// none: every port).
pub fn ingress_from_pod(from: &str, ports: &[(&str, u16)]) -> String {
    format!("  ingress:\n  - from:\n    - podSelector: {}\n{}", pod_selector(from), ports_lines(ports))
}

/// Spec lines isolating the selected pods for egress and allowing it to the pods labelled
/// `pod: <to>` on `ports` (none: every port).
pub fn egress_to_pod(to: &str, ports: &[(&str, u16)]) -> String {
    format!(
        "  policyTypes: [Egress]\n  egress:\n  - to:\n    - podSelector: {}\n{}",
        pod_selector(to),
        ports_lines(ports)
    )
}

/// A policy `namespace/name` letting pod `from` reach pod `pod` on `ports` (none: every
/// port), and isolating `pod` for ingress.
pub fn allow_ingress(namespace: &str, name: &str, pod: &str, from: &str, ports: &[(&str, u16)]) -> String {
    network_policy(namespace, name, &pod_selector(pod), &ingress_from_pod(from, ports))
}

/// A policy `namespace/name` letting pod `pod` open connections to pod `to` on `ports` (none:
/// every port) and nothing else.
pub fn allow_egress(namespace: &str, name: &str, pod: &str, to: &str, ports: &[(&str, u16)]) -> String {
    network_policy(namespace, name, &pod_selector(pod), &egress_to_pod(to, ports))
}

/// The `ports:` line of a rule (empty for every port).
fn ports_lines(ports: &[(&str, u16)]) -> String {
    if ports.is_empty() {
        return String::new();
    }
    let list: Vec<String> =
        ports.iter().map(|(protocol, port)| format!("{{protocol: {protocol}, port: {port}}}")).collect();
    format!("    ports: [{}]\n", list.join(", "))
}
