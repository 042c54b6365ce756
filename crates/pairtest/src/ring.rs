//! A ring's one step: serve the predecessor on a thread while testing the successor. It must never
//! return before the listener's thread has ended, so nothing the listener opened outlives the step.

/// Runs `serve` on a thread of its own and `test` on this one (`None`: `serve` never ended well).
pub fn step<S: Send, T>(serve: impl FnOnce() -> S + Send, test: impl FnOnce() -> T) -> (T, Option<S>) {
    std::thread::scope(|scope| {
        let listener = std::thread::Builder::new().name("ring-listener".into()).spawn_scoped(scope, serve);
        let tested = test();
        let served = listener.ok().and_then(|h| h.join().ok());
        (tested, served)
    })
}
