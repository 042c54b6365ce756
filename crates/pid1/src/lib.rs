//! Apply and run, the last stages: memlock, exec, supervision as PID 1 and its raw system calls
//! (`sys`). Takes the argv and the finished environment; decides nothing about ports or variables.

#![deny(unsafe_code)]

pub mod exec;
pub mod memlock;
pub mod supervise;
#[allow(unsafe_code)] // Raw fork/exec/signal calls, fenced with SAFETY comments.
pub mod sys;
