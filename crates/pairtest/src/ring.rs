//! A ring's one step, the same under every front end that runs one (ping's `--ring`, the gate):
//! this pod serves its predecessor's test on a thread of its own while it tests its successor on
//! the caller's thread, and the step ends when both have. The node agents' ring is the same two
//! halves apart: its listener answers for the agent's whole life (the agents' rounds are not in
//! step), and each ring round tests the successor.
//!
//! It must never return before the listener's thread has ended: nothing the listener opened (its
//! connections, its verbs contexts, opened on its own thread) outlives the step.

/// Runs `serve` (the listener: it decides when it is done, after one predecessor, at its wait's
/// end, or when the caller's `test` tells it to stop) on a thread of its own, and `test` on this
/// one. Returns what the test found and what the listener did (`None`: its thread could not be
/// started, or ended in a panic).
pub fn step<S: Send, T>(serve: impl FnOnce() -> S + Send, test: impl FnOnce() -> T) -> (T, Option<S>) {
    std::thread::scope(|scope| {
        let listener = std::thread::Builder::new().name("ring-listener".into()).spawn_scoped(scope, serve);
        let tested = test();
        let served = listener.ok().and_then(|h| h.join().ok());
        (tested, served)
    })
}
