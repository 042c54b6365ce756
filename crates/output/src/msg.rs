//! Messages for people. Every line nccl-wrap writes to stderr for a person starts with
//! [`PREFIX`], so a pod's log shows at a glance which lines are the wrapper's; detail for
//! debugging goes through `log` (`NCCL_WRAP_LOG`) instead. The lowest module: it names nothing.

pub const PREFIX: &str = "nccl-wrap:";
