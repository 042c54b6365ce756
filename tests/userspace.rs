//! The training image's userspace, on fixture image roots (`fixtures/images`, `--image-root`):
//! what NCCL in the image will load, the warning that names a missing file and its package, the
//! refusal under `--require-rdma`, and the `NCCL_NET=IB` pin (none with a net plugin).

mod common;

use common::{image, Run};

const NODE: &str = "h100-roce-sriov";

fn on(img: &str) -> Run {
    Run::node(NODE).with_env_file(NODE, "env").env("NCCL_WRAP_IMAGE_ROOT", image(img))
}

#[test]
fn a_full_rdma_core_image_is_named_and_pinned_under_require_rdma() {
    let d = on("full").args(["env", "--json"]);
    let j = d.success().json();
    let u = &j["userspace"];
    assert!(u["libibverbs"]["path"].as_str().is_some_and(|p| p.ends_with("-linux-gnu/libibverbs.so.1")), "{u}");
    assert_eq!(u["providers"][0]["name"], "mlx5", "{u}");
    assert!(u["providers"][0]["library"].as_str().is_some_and(|p| p.ends_with("libibverbs/libmlx5-rdmav34.so")), "{u}");
    assert_eq!(u["nccl"]["version"], "2.28.9", "{u}");
    assert_eq!(u["missing"].as_array().map(Vec::len), Some(0), "{u}");
    // Not pinned without --require-rdma; pinned with it.
    assert!(!d.stdout().contains("NCCL_NET"));
    let pinned = on("full").env("NCCL_WRAP_REQUIRE_RDMA", "1").args(["env"]);
    assert!(pinned.success().stdout().contains("export NCCL_NET='IB'\n"), "{}", pinned.stdout());
}

#[test]
fn an_image_without_libibverbs_warns_and_refuses_under_require_rdma() {
    let warned = on("no-verbs").args(["--supervise=false", "--", "true"]);
    warned.success().stderr_has("warning: the image lacks libibverbs.so.1 (libibverbs1 on Debian/Ubuntu");
    let refused = on("no-verbs").args(["--require-rdma", "--supervise=false", "--", "true"]);
    refused.code_is(125).stderr_has("refusing to start \"true\": --require-rdma").stderr_has("libibverbs.so.1");
}

#[test]
fn libibverbs_without_its_provider_names_ibverbs_providers() {
    let d = on("no-provider").args(["env", "--json"]);
    let j = d.success().json();
    let missing = j["userspace"]["missing"][0]["file"].as_str().unwrap_or_default().to_string();
    assert!(missing.ends_with("libibverbs/libmlx5-rdmav*.so"), "{missing}");
    assert!(j["userspace"]["missing"][0]["package"].as_str().is_some_and(|p| p.contains("ibverbs-providers")));
    on("no-provider").args(["--require-rdma", "--supervise=false", "--", "true"]).code_is(125);
}

#[test]
fn pytorchs_wheel_nccl_is_what_the_command_loads() {
    let j = on("wheel-nccl").args(["env", "--json"]).success().json();
    let n = &j["userspace"]["nccl"];
    assert_eq!(n["path"], "/usr/local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2", "{n}");
    assert_eq!(n["by"], "PyTorch wheel (nvidia-nccl)");
    // A venv reached through PATH alone comes first.
    let venv =
        on("wheel-nccl").env("PATH", "/nonexistent/venv/bin:/usr/local/bin:/usr/bin:/bin").args(["env", "--json"]);
    assert_eq!(venv.success().json()["userspace"]["nccl"]["by"], "PyTorch wheel (nvidia-nccl)");
}

#[test]
fn a_net_plugin_is_named_and_nccl_net_is_not_pinned() {
    let r = on("plugin").env("NCCL_NET_PLUGIN", "ofi").env("LD_LIBRARY_PATH", "/opt/amazon/ofi-nccl/lib");
    let d = r.args(["--require-rdma", "--supervise=false", "--", "true"]);
    d.success()
        .stderr_has("net plugin /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so (NCCL_NET_PLUGIN=ofi via LD_LIBRARY_PATH)")
        .stderr_has("NCCL_NET not pinned")
        .stderr_lacks("set NCCL_NET=");
}

#[test]
fn ld_so_cache_finds_a_library_outside_the_default_directories() {
    use nccl_wrap::detect::ldcache::{encode, NATIVE};
    let dir = common::Scratch::new("image-cache");
    let root = dir.path();
    std::fs::create_dir_all(root.join("etc/libibverbs.d")).expect("mkdir");
    std::fs::create_dir_all(root.join("opt/rdma/lib/libibverbs")).expect("mkdir");
    std::fs::write(root.join("opt/rdma/lib/libibverbs.so.1"), "").expect("write");
    std::fs::write(root.join("opt/rdma/lib/libibverbs/libmlx5-rdmav34.so"), "").expect("write");
    std::fs::write(root.join("etc/libibverbs.d/mlx5.driver"), "driver mlx5\n").expect("write");
    std::fs::write(
        root.join("etc/ld.so.cache"),
        encode(&[("libibverbs.so.1", "/opt/rdma/lib/libibverbs.so.1", NATIVE)]),
    )
    .expect("write");
    let j = Run::node(NODE).with_env_file(NODE, "env").env("NCCL_WRAP_IMAGE_ROOT", root).args(["env", "--json"]);
    let j = j.success().json();
    assert_eq!(j["userspace"]["libibverbs"]["by"], "ld.so.cache", "{}", j["userspace"]);
    assert_eq!(j["userspace"]["ld_cache"], "1 entries");
    assert_eq!(j["userspace"]["missing"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_hostile_ld_so_cache_is_refused_and_the_check_goes_on() {
    let dir = common::Scratch::new("image-hostile");
    let root = dir.path();
    std::fs::create_dir_all(root.join("etc")).expect("mkdir");
    // A FIFO without a writer: opening it must not block, reading it is refused by kind.
    let fifo = root.join("etc/ld.so.cache");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        common::skip("mkfifo unavailable");
        return;
    }
    let j = Run::node(NODE).with_env_file(NODE, "env").env("NCCL_WRAP_IMAGE_ROOT", root).args(["env", "--json"]);
    let j = j.success().json();
    assert!(
        j["userspace"]["ld_cache"].as_str().is_some_and(|s| s.contains("not a regular file")),
        "{}",
        j["userspace"]
    );
    // Garbage in its place: no cache, the default directories still searched.
    std::fs::remove_file(&fifo).expect("rm");
    std::fs::write(&fifo, b"glibc-ld.so.cache1.1\xff\xff\xff\xff").expect("write");
    let j = Run::node(NODE).with_env_file(NODE, "env").env("NCCL_WRAP_IMAGE_ROOT", root).args(["env", "--json"]);
    assert!(j.success().json()["userspace"]["ld_cache"].as_str().is_some_and(|s| s.starts_with("not a glibc")));
}

fn doctor_check(img: &str, vars: &[(&str, &str)]) -> serde_json::Value {
    let root = common::fixture(NODE);
    let mut r = on(img).env("NCCL_WRAP_DEV_ROOT", root.join("dev"));
    for (k, v) in vars {
        r = r.env(k, v);
    }
    let j = r.args(["doctor", "--json", "--no-selftest"]).json();
    j["checks"].as_array().expect("checks").iter().find(|c| c["id"] == "userspace").cloned().expect("userspace check")
}

#[test]
fn doctor_fails_an_image_that_would_run_nccl_over_sockets_and_reads_the_wheels_version() {
    let c = doctor_check("no-verbs", &[]);
    assert_eq!(c["status"], "fail", "{c}");
    assert!(c["summary"].as_str().is_some_and(|s| s.contains("missing: libibverbs.so.1")), "{c}");
    assert!(c["hint"].as_str().is_some_and(|s| s.contains("libibverbs1")), "{c}");
    // The wheel's file name says no version: doctor reads it from the library's text.
    let c = doctor_check("wheel-nccl", &[]);
    assert_eq!(c["status"], "pass", "{c}");
    assert!(c["summary"].as_str().is_some_and(|s| s.contains("NCCL 2.27.3 is /usr/local/lib/python3.11/")), "{c}");
}

#[test]
fn doctor_names_a_provider_built_for_another_libibverbs_abi() {
    // libibverbs of ABI 34 (the symbol version its providers link against, as the real library
    // carries it in its dynamic string table) beside an mlx5 provider of ABI 25 only.
    let dir = common::Scratch::new("image-abi");
    let root = dir.path();
    // The loader's default directory of the architecture the tests run as (qemu-user on aarch64).
    let triplet = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu" } else { "x86_64-linux-gnu" };
    let lib = root.join("usr/lib").join(triplet);
    std::fs::create_dir_all(lib.join("libibverbs")).expect("mkdir");
    std::fs::create_dir_all(root.join("etc/libibverbs.d")).expect("mkdir");
    let mut text = vec![0x7fu8, b'E', b'L', b'F'];
    text.extend(std::iter::repeat_n(0u8, 70_000));
    text.extend_from_slice(b"IBVERBS_1.1\0IBVERBS_PRIVATE_34\0ibv_cmd_create_qp\0");
    std::fs::write(lib.join("libibverbs.so.1"), &text).expect("write");
    std::fs::write(lib.join("libibverbs/libmlx5-rdmav25.so"), "").expect("write");
    std::fs::write(root.join("etc/libibverbs.d/mlx5.driver"), "driver mlx5\n").expect("write");
    let fixture = common::fixture(NODE);
    let run = |args: &[&str]| {
        Run::node(NODE)
            .with_env_file(NODE, "env")
            .env("NCCL_WRAP_IMAGE_ROOT", root)
            .env("NCCL_WRAP_DEV_ROOT", fixture.join("dev"))
            .args(args)
    };
    let j = run(&["doctor", "--json", "--no-selftest"]).json();
    let c = j["checks"].as_array().expect("checks").iter().find(|c| c["id"] == "userspace").cloned().expect("check");
    assert_eq!(c["status"], "fail", "{c}");
    let text = c.to_string();
    assert!(text.contains("libmlx5-rdmav25.so is built for libibverbs' private ABI 25"), "{text}");
    assert!(text.contains("is ABI 34: libibverbs skips it"), "{text}");
    // With the provider of libibverbs' own ABI beside it, that one is what libibverbs loads.
    std::fs::write(lib.join("libibverbs/libmlx5-rdmav34.so"), "").expect("write");
    let j = run(&["doctor", "--json", "--no-selftest"]).json();
    let c = j["checks"].as_array().expect("checks").iter().find(|c| c["id"] == "userspace").cloned().expect("check");
    assert_ne!(c["status"], "fail", "{c}");
    assert_eq!(c["evidence"]["userspace"]["missing"].as_array().map(Vec::len), Some(0), "{c}");
    assert!(c["summary"].as_str().is_some_and(|s| s.contains("libmlx5-rdmav34.so")), "{c}");
}

/// The `full` image with its NCCL made `version` (the versioned file its `libnccl.so.2` names).
fn full_with_nccl(version: &str) -> common::Scratch {
    let root = common::Scratch::new(&format!("image-nccl-{version}"));
    let st = std::process::Command::new("cp").arg("-a").arg(image("full")).arg(root.path().join("img")).status();
    assert!(st.expect("cp").success(), "cp -a");
    let triplet = if cfg!(target_arch = "aarch64") { "aarch64-linux-gnu" } else { "x86_64-linux-gnu" };
    let lib = root.path().join(format!("img/usr/lib/{triplet}"));
    std::fs::remove_file(lib.join("libnccl.so.2")).expect("rm");
    std::fs::write(lib.join(format!("libnccl.so.{version}")), b"NCCL stand-in").expect("write");
    std::os::unix::fs::symlink(format!("libnccl.so.{version}"), lib.join("libnccl.so.2")).expect("symlink");
    root
}

fn with_image(root: &common::Scratch) -> Run {
    Run::node(NODE).with_env_file(NODE, "env").env("NCCL_WRAP_IMAGE_ROOT", root.path().join("img"))
}

#[test]
fn nccl_2_30_under_an_interlock_is_told_to_fail_on_unequal_nics() {
    let img = full_with_nccl("2.30.7");
    // --require-rdma: exported, and said with the version that reads it.
    let r = with_image(&img).env("NCCL_WRAP_REQUIRE_RDMA", "1").args(["--", "/usr/bin/env", "-0"]);
    r.success()
        .stderr_has("NCCL_IGNORE_NET_MISMATCH=0 under --require-rdma: ranks handed different numbers of NICs fail at NCCL's init instead of starting crippled or spinning")
        .stderr_has("NCCL 2.30.7 reads it");
    assert_eq!(r.child_var("NCCL_IGNORE_NET_MISMATCH").as_deref(), Some("0"));
    // The gate (refusing) promises the same; --gate=warn and no interlock do not.
    let gate = with_image(&img).env("NCCL_WRAP_GATE", "1").args(["env"]);
    assert!(gate.success().stdout().contains("export NCCL_IGNORE_NET_MISMATCH='0'\n"), "{}", gate.stdout());
    for r in [with_image(&img).env("NCCL_WRAP_GATE", "warn"), with_image(&img)] {
        let out = r.args(["env"]);
        assert!(!out.success().stdout().contains("NCCL_IGNORE_NET_MISMATCH"), "{}", out.stdout());
    }
    // A user's value is kept, and named, unless --override.
    let kept = with_image(&img).env("NCCL_WRAP_REQUIRE_RDMA", "1").env("NCCL_IGNORE_NET_MISMATCH", "1");
    kept.args(["--", "true"]).success().stderr_has("NCCL_IGNORE_NET_MISMATCH is already set to \"1\"; kept");
    let over = with_image(&img).env("NCCL_WRAP_REQUIRE_RDMA", "1").env("NCCL_IGNORE_NET_MISMATCH", "1");
    let r = over.args(["--override", "--", "/usr/bin/env", "-0"]);
    assert_eq!(r.success().child_var("NCCL_IGNORE_NET_MISMATCH").as_deref(), Some("0"));
}

#[test]
fn nccl_before_2_30_is_not_told_and_an_unknown_version_is_told_anyway() {
    // The `full` image's NCCL is 2.28.9: it does not read the variable.
    let r = on("full").env("NCCL_WRAP_REQUIRE_RDMA", "1").args(["env"]);
    assert!(!r.success().stdout().contains("NCCL_IGNORE_NET_MISMATCH"), "{}", r.stdout());
    // The PyTorch wheel's libnccl.so.2 names no version: set, and said why.
    let r = on("wheel-nccl").env("NCCL_WRAP_REQUIRE_RDMA", "1").args(["--", "true"]);
    r.success()
        .stderr_has("set NCCL_IGNORE_NET_MISMATCH='0'")
        .stderr_has("NCCL's version is not known from its file name (`nccl-wrap doctor` reads it): set anyway, as NCCL before 2.30 does not read it");
}
