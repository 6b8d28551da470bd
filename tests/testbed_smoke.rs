//! The test fixtures themselves, against real ovs-vswitchd: sandboxes side by side, restarts.

mod support;

use support::Sandbox;

#[test]
fn sandbox_bridge_answers_openflow15() {
    let sb = Sandbox::start();
    assert!(sb.ofp.starts_with("unix:") && sb.ofp.ends_with("/br-int.mgmt"));
    assert!(sb.dir.join("br-int.mgmt").exists());
    let show = sb.ofctl(&["show"]);
    assert!(show.contains("OFPT_FEATURES_REPLY (OF1.5)"), "{show}");
    assert_eq!(sb.vsctl(&["get", "Bridge", "br-int", "fail_mode"]).trim(), "secure");
    assert_eq!(sb.vsctl(&["get", "Bridge", "br-int", "datapath_type"]).trim(), "netdev");
    assert!(sb.dump_flows().is_empty(), "a fresh secure bridge has no flows");
}

#[test]
fn sandboxes_run_side_by_side_and_are_isolated() {
    let one = Sandbox::start();
    let two = Sandbox::start();
    assert_ne!(one.netns, two.netns);
    assert_ne!(one.vswitchd_pid(), two.vswitchd_pid());
    one.ofctl(&["add-flow", "table=0,priority=7,ip,actions=drop"]);
    assert_eq!(one.dump_flows(), vec!["priority=7,ip actions=drop".to_owned()]);
    assert!(two.dump_flows().is_empty(), "a flow leaked to the other sandbox");
    let pid_two = two.vswitchd_pid();
    drop(one);
    // the other sandbox is untouched by the first one's teardown
    assert_eq!(two.vswitchd_pid(), pid_two);
    assert!(two.ofctl(&["show"]).contains("FEATURES_REPLY"));
}

#[test]
fn sandbox_down_stops_its_daemons_and_netns() {
    let sb = Sandbox::start();
    let pid = sb.vswitchd_pid();
    let netns = sb.netns.clone();
    let dir = sb.dir.clone();
    drop(sb);
    assert!(!alive(pid), "ovs-vswitchd {pid} survived down");
    let list = support::sandbox::run(std::process::Command::new("ip").args(["netns", "list"]));
    assert!(!list.contains(&netns), "netns {netns} survived down");
    assert!(!dir.exists(), "temp run dir not removed");
}

#[test]
fn restart_vswitchd_empties_tables_and_bridge_comes_back() {
    let sb = Sandbox::start();
    sb.ofctl(&["add-flow", "priority=3,actions=drop"]);
    let before = sb.vswitchd_pid();
    sb.restart_vswitchd();
    let after = sb.vswitchd_pid();
    assert_ne!(before, after);
    assert!(!alive(before));
    assert!(sb.dump_flows().is_empty());
    sb.ofctl(&["add-flow", "priority=4,actions=drop"]);
    assert_eq!(sb.dump_flows(), vec!["priority=4 actions=drop".to_owned()]);

    sb.stop_vswitchd("KILL");
    assert!(!alive(after));
    assert!(sb.try_ofctl(&["show"]).is_err(), "switch still answers after stop");
    sb.start_vswitchd();
    assert!(sb.dump_flows().is_empty());
}

fn alive(pid: u32) -> bool {
    // a zombie is as good as gone: its parent (not us) has yet to reap it
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}
