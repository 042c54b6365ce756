mod probe;
mod verbs;

fn main() {
    // Hidden entry for the Soft-RoCE lab and debugging: `nccl-wrap __verbs list|port|selftest ...`.
    if std::env::args().nth(1).as_deref() == Some("__verbs") {
        std::process::exit(verbs::debug_main(std::env::args().skip(2).collect()));
    }
    println!("nccl-wrap");
}
