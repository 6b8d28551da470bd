//! Test fixtures shared by the integration tests: a private Open vSwitch per test
//! ([`Sandbox`], from `scripts/ovs-sandbox`) and, on top of it, the nine pods of the upstream
//! netpol e2e model with a prober ([`Testbed`], from `testbed/testbed` and `testbed/probe.py`).
//!
//! Include it from a test file with `mod support;`. Everything here needs root (network
//! namespaces) and panics with the failing command's stderr: it is test code.
#![allow(dead_code, unused_imports)]

pub mod agent;
pub mod audit_log;
pub mod bed;
pub mod cluster;
pub mod cni_node;
pub mod containerd;
pub mod cri;
pub mod image;
pub mod podman;
pub mod policy;
pub mod rootfs;
pub mod sandbox;
pub mod testbed;
pub mod wait;
pub mod yaml;

pub use sandbox::Sandbox;
pub use testbed::{
    cluster_ip, eventually, finish, finish_count, node_env, write_atomic, Hosts, Pod, Port, Reachability, Testbed,
    A_FROM_B, GATEWAY_IP, NAMESPACES_X_LOGGING, SERVICE_CIDR,
};
pub use wait::{exit_within, wait_until, wait_until_every};
