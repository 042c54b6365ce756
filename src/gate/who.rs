//! Who this pod is in its job (rank, size, coordinator, job id): each gate option, else the first
//! launcher of `LAUNCHERS` whose rank variable is set. Pure. `MASTER_PORT` is never used: the
//! launcher owns it.

use std::ffi::OsStr;

use super::wire::{check_job, Bootstrap, MAX_GATE_SIZE};
use nw_observe::detect::Vars;
use nw_pairtest::exchange::split_target;

/// What the gate's options say (each `None` when not given).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    pub coordinator: Option<String>,
    pub rank: Option<u32>,
    pub size: Option<u32>,
    pub port: u16,
    pub id: Option<String>,
    /// This pod's NCCL bootstrap interface and family (the plan's), compared across the job.
    pub bootstrap: Option<Bootstrap>,
}

/// This pod's place in the job, and where each value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub rank: u32,
    pub size: u32,
    /// Rank 0's `HOST:PORT`.
    pub coordinator: String,
    /// The TCP port this pod listens on: the coordinator's on rank 0, `--gate-port` elsewhere.
    pub port: u16,
    pub job: String,
    /// "rank from PET_NODE_RANK, size from PET_NNODES, coordinator from PET_MASTER_ADDR".
    pub source: String,
    /// How this pod's NCCL bootstrap reaches rank 0 (from [`Given`]).
    pub bootstrap: Option<Bootstrap>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhoError {
    #[error("the gate needs this pod's rank: set NCCL_WRAP_GATE_RANK, or run under a launcher that sets PET_NODE_RANK (torchrun, PyTorchJob), RANK, JOB_COMPLETION_INDEX (Indexed Job, JobSet) or SLURM_NODEID")]
    NoRank,
    #[error("the gate needs the number of pods: set NCCL_WRAP_GATE_SIZE ({0} gives the rank but not the size)")]
    NoSize(&'static str),
    #[error("the gate needs rank 0's address: set NCCL_WRAP_GATE_COORDINATOR=HOST[:PORT] ({0} gives the rank but not the coordinator)")]
    NoCoordinator(&'static str),
    #[error("{name}={value:?} is not a whole number")]
    NotNumber { name: &'static str, value: String },
    #[error("PET_NNODES={0:?} is an elastic range: the gate needs a fixed number of pods; set NCCL_WRAP_GATE_SIZE, or MIN:MAX with MIN = MAX")]
    Elastic(String),
    #[error("the job size is {0}, not in 1..={MAX_GATE_SIZE}")]
    BadSize(u32),
    #[error(
        "this pod's rank {rank} ({source_name}) is not below the job size {size}: check the rank and size variables"
    )]
    RankOutOfRange { rank: u32, size: u32, source_name: &'static str },
    #[error("the coordinator {value:?} ({source_name}) is not HOST or HOST:PORT: {detail}")]
    BadCoordinator { value: String, source_name: &'static str, detail: String },
    #[error("NCCL_WRAP_GATE_ID {0:?} is not 1..=253 printable ASCII bytes")]
    BadId(String),
}

/// One launcher: the variables of its rank, size and coordinator (empty: must be given).
/// PyTorchJob's `RANK` and `WORLD_SIZE` count pods (one process per pod).
struct Launcher {
    rank: &'static str,
    size: &'static str,
    coordinator: &'static str,
}

const LAUNCHERS: &[Launcher] = &[
    Launcher { rank: "PET_NODE_RANK", size: "PET_NNODES", coordinator: "PET_MASTER_ADDR" },
    Launcher { rank: "RANK", size: "WORLD_SIZE", coordinator: "MASTER_ADDR" },
    Launcher { rank: "JOB_COMPLETION_INDEX", size: "", coordinator: "" },
    Launcher { rank: "SLURM_NODEID", size: "SLURM_NNODES", coordinator: "" },
];

fn var(vars: &Vars, name: &str) -> Option<String> {
    let v = vars.get(OsStr::new(name)).filter(|_| !name.is_empty())?;
    Some(v.to_string_lossy().trim().to_owned()).filter(|v| !v.is_empty())
}

fn number(name: &'static str, value: &str) -> Result<u32, WhoError> {
    value.parse().map_err(|_| WhoError::NotNumber { name, value: value.to_owned() })
}

/// `PET_NNODES` is `N` or, elastic, `MIN:MAX`: only a fixed size is a job the gate can wait for.
fn size_of(name: &'static str, value: &str) -> Result<u32, WhoError> {
    match value.split_once(':') {
        Some((lo, hi)) if lo.trim() == hi.trim() => number(name, lo.trim()),
        Some(_) => Err(WhoError::Elastic(value.to_owned())),
        None => number(name, value),
    }
}

/// Resolves who this pod is from the gate's options and the variables.
pub fn resolve(given: &Given, vars: &Vars) -> Result<Who, WhoError> {
    let launcher = LAUNCHERS.iter().find(|l| var(vars, l.rank).is_some());
    let (rank, rank_from) = match (given.rank, launcher) {
        (Some(r), _) => (r, "NCCL_WRAP_GATE_RANK"),
        (None, Some(l)) => (number(l.rank, &var(vars, l.rank).unwrap_or_default())?, l.rank),
        (None, None) => return Err(WhoError::NoRank),
    };
    // The launcher's variable, where it has one and it is set.
    let from = |name: fn(&Launcher) -> &'static str| launcher.and_then(|l| Some((var(vars, name(l))?, name(l))));
    let (size, size_from) = match (given.size, from(|l| l.size)) {
        (Some(s), _) => (s, "NCCL_WRAP_GATE_SIZE"),
        (None, Some((v, name))) => (size_of(name, &v)?, name),
        (None, None) => return Err(WhoError::NoSize(rank_from)),
    };
    if !(1..=MAX_GATE_SIZE).contains(&size) {
        return Err(WhoError::BadSize(size));
    }
    if rank >= size {
        return Err(WhoError::RankOutOfRange { rank, size, source_name: rank_from });
    }
    let (coord, coord_from) = match (&given.coordinator, from(|l| l.coordinator)) {
        (Some(c), _) => (c.trim().to_owned(), "NCCL_WRAP_GATE_COORDINATOR"),
        (None, Some(found)) => found,
        (None, None) => return Err(WhoError::NoCoordinator(rank_from)),
    };
    let bad = |detail: String| WhoError::BadCoordinator { value: coord.clone(), source_name: coord_from, detail };
    // HOST, HOST:PORT, [V6] or [V6]:PORT; a bare IPv6 address has more than one colon.
    let with_port = if coord.starts_with('[') && coord.ends_with(']') || coord.matches(':').count() > 1 {
        let bare = coord.trim_start_matches('[').trim_end_matches(']');
        format!("[{bare}]:{}", given.port)
    } else if coord.contains(':') {
        coord.clone()
    } else {
        format!("{coord}:{}", given.port)
    };
    let (_, coord_port) = split_target(&with_port).map_err(|e| bad(e.to_string()))?;
    let port = if rank == 0 { coord_port } else { given.port };
    if let Some(id) = &given.id {
        check_job(id).map_err(|_| WhoError::BadId(id.clone()))?;
    }
    let job = given.id.clone().unwrap_or_else(|| format!("{with_port}/{size}"));
    let source = format!("rank from {rank_from}, size from {size_from}, coordinator from {coord_from}");
    Ok(Who { rank, size, coordinator: with_port, port, job, source, bootstrap: given.bootstrap.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn vars(list: &[(&str, &str)]) -> Vars {
        list.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
    }

    fn given() -> Given {
        Given { port: 18516, ..Given::default() }
    }

    #[test]
    fn torchrun_variables_come_first() {
        let v = vars(&[
            ("PET_NODE_RANK", "2"),
            ("PET_NNODES", "4"),
            ("PET_MASTER_ADDR", "llm-train-master-0"),
            ("RANK", "17"),
            ("WORLD_SIZE", "32"),
            ("MASTER_ADDR", "other"),
            ("MASTER_PORT", "29500"),
        ]);
        let w = resolve(&given(), &v).expect("who");
        assert_eq!((w.rank, w.size, w.coordinator.as_str(), w.port), (2, 4, "llm-train-master-0:18516", 18516));
        assert_eq!(w.source, "rank from PET_NODE_RANK, size from PET_NNODES, coordinator from PET_MASTER_ADDR");
        assert_eq!(w.job, "llm-train-master-0:18516/4", "the default job identity");
    }

    #[test]
    fn pytorchjob_then_indexed_job_then_slurm() {
        let w = resolve(&given(), &vars(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "m-0")])).expect("who");
        assert_eq!((w.rank, w.size, w.coordinator.as_str()), (1, 2, "m-0:18516"));
        assert!(w.source.starts_with("rank from RANK, size from WORLD_SIZE"), "{}", w.source);

        let g = Given { coordinator: Some("train-0.train".into()), size: Some(3), ..given() };
        let w = resolve(&g, &vars(&[("JOB_COMPLETION_INDEX", "2")])).expect("who");
        assert_eq!((w.rank, w.size), (2, 3));
        assert_eq!(
            w.source,
            "rank from JOB_COMPLETION_INDEX, size from NCCL_WRAP_GATE_SIZE, coordinator from NCCL_WRAP_GATE_COORDINATOR"
        );
        assert_eq!(
            resolve(&given(), &vars(&[("JOB_COMPLETION_INDEX", "2")])),
            Err(WhoError::NoSize("JOB_COMPLETION_INDEX"))
        );

        let v = vars(&[("SLURM_NODEID", "0"), ("SLURM_NNODES", "8")]);
        assert_eq!(resolve(&given(), &v), Err(WhoError::NoCoordinator("SLURM_NODEID")));
        let g = Given { coordinator: Some("10.0.0.1:2000".into()), ..given() };
        let w = resolve(&g, &v).expect("who");
        assert_eq!((w.rank, w.size, w.coordinator.as_str(), w.port), (0, 8, "10.0.0.1:2000", 2000));
        // Rank 0 listens on the coordinator's port, the others on the gate port.
        let w = resolve(&g, &vars(&[("SLURM_NODEID", "3"), ("SLURM_NNODES", "8")])).expect("who");
        assert_eq!((w.coordinator.as_str(), w.port), ("10.0.0.1:2000", 18516));
    }

    #[test]
    fn the_gate_options_win_one_by_one() {
        let v = vars(&[("PET_NODE_RANK", "1"), ("PET_NNODES", "2"), ("PET_MASTER_ADDR", "m")]);
        let g = Given { rank: Some(0), id: Some("job-uid-1".into()), ..given() };
        let w = resolve(&g, &v).expect("who");
        assert_eq!((w.rank, w.size, w.job.as_str()), (0, 2, "job-uid-1"));
        assert!(w.source.starts_with("rank from NCCL_WRAP_GATE_RANK, size from PET_NNODES"), "{}", w.source);
        let w =
            resolve(&Given { size: Some(1), rank: Some(0), coordinator: Some("::1".into()), ..given() }, &vars(&[]))
                .expect("v6");
        assert_eq!(w.coordinator, "[::1]:18516");
    }

    #[test]
    fn wrong_and_missing_values_are_named() {
        assert_eq!(resolve(&given(), &vars(&[])), Err(WhoError::NoRank));
        let v = vars(&[("PET_NODE_RANK", "x"), ("PET_NNODES", "2"), ("PET_MASTER_ADDR", "m")]);
        assert_eq!(resolve(&given(), &v), Err(WhoError::NotNumber { name: "PET_NODE_RANK", value: "x".into() }));
        let v = vars(&[("PET_NODE_RANK", "0"), ("PET_NNODES", "2:4"), ("PET_MASTER_ADDR", "m")]);
        assert_eq!(resolve(&given(), &v), Err(WhoError::Elastic("2:4".into())));
        let v = vars(&[("PET_NODE_RANK", "0"), ("PET_NNODES", "4:4"), ("PET_MASTER_ADDR", "m")]);
        assert_eq!(resolve(&given(), &v).expect("fixed elastic").size, 4);
        let v = vars(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "m")]);
        assert!(matches!(resolve(&given(), &v), Err(WhoError::RankOutOfRange { rank: 2, size: 2, .. })));
        let v = vars(&[("RANK", "0"), ("WORLD_SIZE", "0"), ("MASTER_ADDR", "m")]);
        assert_eq!(resolve(&given(), &v), Err(WhoError::BadSize(0)));
        let v = vars(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "$(reboot)")]);
        assert!(matches!(resolve(&given(), &v), Err(WhoError::BadCoordinator { source_name: "MASTER_ADDR", .. })));
        let g = Given { id: Some("a b".into()), ..given() };
        let v = vars(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "m")]);
        assert_eq!(resolve(&g, &v), Err(WhoError::BadId("a b".into())));
    }
}
