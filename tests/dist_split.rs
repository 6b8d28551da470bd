//! What lands on nodes is stripped, with its symbols kept apart for profiling
//! (scripts/build-dist): the split of a binary is the binary without debug information or
//! symbol table, naming `npagent.debug` in its `.gnu_debuglink`, and `npagent.debug` with its
//! line tables and symbols, both of the same build id; `perf report` of a run of the stripped
//! binary names its functions through `npagent.debug`, and does not without it. The test
//! splits the debug binary (`--binary`): the dist profile's is built the same way but takes a
//! release build. Needs objcopy, readelf and perf (scripts/test installs them), and root for
//! perf's samples.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::path::Path;
use std::process::Command;

use support::agent::npagent_bin;
use support::sandbox::{output, repo_path, run};

/// The names of the sections of ELF file `path` that hold debug information or symbols
/// (`.debug_*` not loaded, `.symtab`), and whether it has a `.gnu_debuglink`.
fn debug_sections(path: &Path) -> (Vec<String>, bool) {
    let text = run(Command::new("readelf").args(["-S", "-W"]).arg(path));
    let mut found = Vec::new();
    let mut debuglink = false;
    for fields in text.lines().filter_map(|l| l.split_once("] ")).map(|(_, r)| r.split_whitespace().collect::<Vec<_>>())
    {
        let Some(name) = fields.first() else { continue };
        // Name, type, address, offset, size, entry size, [flags,] link, info, alignment.
        let loaded = fields.len() == 10 && fields[6].contains('A');
        if (name.starts_with(".debug_") && !loaded) || *name == ".symtab" {
            found.push(name.to_string());
        }
        debuglink |= *name == ".gnu_debuglink";
    }
    (found, debuglink)
}

fn build_id(path: &Path) -> String {
    let out = output(Command::new("readelf").arg("-n").arg(path));
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: ")).map(str::to_owned);
    id.unwrap_or_else(|| panic!("{} has no build id:\n{text}", path.display()))
}

/// The symbols `perf report` gives the samples of `data` in the `npagent` DSO.
fn perf_symbols(data: &Path) -> Vec<String> {
    let text = run(Command::new("perf")
        .args(["report", "--stdio", "--dsos", "npagent", "--sort", "sym", "-i"])
        .arg(data)
        .env("PAGER", "cat"));
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains("[.]"))
        .filter_map(|l| l.split_once("[.]").map(|(_, sym)| sym.trim().to_owned()))
        .collect()
}

#[test]
fn the_split_binary_is_stripped_and_perf_names_its_functions_through_the_kept_symbols() {
    let binary = npagent_bin();
    let (in_binary, _) = debug_sections(&binary);
    assert!(in_binary.iter().any(|s| s == ".debug_line"), "the test's binary has no line tables: {in_binary:?}");
    let work = tempfile::Builder::new().prefix("npa-dist-").tempdir().expect("work dir");
    let out = work.path().join("split");
    let printed =
        run(Command::new(repo_path("scripts/build-dist")).arg("--binary").arg(&binary).arg("--out").arg(&out));
    let stripped = out.join("npagent");
    let symbols = out.join("npagent.debug");
    assert_eq!(printed.trim(), stripped.to_str().unwrap());

    let (left, debuglink) = debug_sections(&stripped);
    assert!(left.is_empty() && debuglink, "{}: debug sections {left:?}, debuglink {debuglink}", stripped.display());
    let (kept, _) = debug_sections(&symbols);
    for section in [".debug_line", ".debug_info", ".symtab"] {
        assert!(kept.iter().any(|s| s == section), "npagent.debug lacks {section}: {kept:?}");
    }
    let link = run(Command::new("readelf").args(["-x", ".gnu_debuglink"]).arg(&stripped));
    assert!(link.contains("npagent.debug"), "{link}");
    assert_eq!(build_id(&stripped), build_id(&binary));
    assert_eq!(build_id(&symbols), build_id(&binary));
    let size = |p: &Path| std::fs::metadata(p).expect("size").len();
    assert!(size(&stripped) < size(&binary) / 2, "{} of {} bytes", size(&stripped), size(&binary));

    // The stripped binary runs, and perf names the functions it sampled from npagent.debug.
    let version = run(Command::new(&stripped).arg("--version"));
    assert!(version.starts_with("npagent "), "{version}");
    let data = work.path().join("perf.data");
    let manifests = repo_path("testbed/manifests");
    let script =
        "for i in $(seq 20); do \"$0\" explain --manifests \"$1\" --from x/b --to x/a --port 80/TCP >/dev/null; done";
    let recorded = output(
        Command::new("perf")
            .args(["record", "-q", "--no-buildid-cache", "-F", "20000", "-o"])
            .arg(&data)
            .args(["--", "bash", "-c", script])
            .arg(&stripped)
            .arg(&manifests),
    );
    assert!(recorded.status.success(), "perf record: {}", String::from_utf8_lossy(&recorded.stderr));
    let named = perf_symbols(&data);
    assert!(named.iter().any(|s| s.contains("::")), "perf named no function of npagent: {named:?}");

    // Control: without npagent.debug, the same samples are bare addresses.
    std::fs::rename(&symbols, work.path().join("elsewhere.debug")).expect("move npagent.debug");
    let bare = perf_symbols(&data);
    assert!(!bare.is_empty() && !bare.iter().any(|s| s.contains("::")), "{bare:?}");
}
