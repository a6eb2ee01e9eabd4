//! Requeueing the Slurm job a training runs in, after it checkpointed on a signal.

use std::fmt;
use std::process::Command;

/// What [`requeue_slurm_job`] did; its [`Display`](fmt::Display) is the message for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requeue {
    /// `scontrol requeue JOB` succeeded: the job restarts and continues with `--resume auto`.
    Requeued {
        /// The Slurm job id.
        job: String,
    },
    /// `SLURM_JOB_ID` is not set: not a Slurm job, nothing requeued.
    NotASlurmJob,
    /// `scontrol` failed or could not run.
    Failed {
        /// The Slurm job id.
        job: String,
        /// Why, in words.
        why: String,
    },
}

impl Requeue {
    /// True if the job was requeued.
    pub fn requeued(&self) -> bool {
        matches!(self, Requeue::Requeued { .. })
    }
}

impl fmt::Display for Requeue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requeue::Requeued { job } => write!(
                f,
                "requeued Slurm job {job} (`scontrol requeue {job}`); it continues the run with --resume auto"
            ),
            Requeue::NotASlurmJob => {
                write!(f, "--requeue: SLURM_JOB_ID is not set (not a Slurm job): not requeued; continue with --resume")
            }
            Requeue::Failed { why, .. } => write!(f, "--requeue: {why}: resubmit the job to continue"),
        }
    }
}

/// Requeues the Slurm job this process runs in (`scontrol requeue $SLURM_JOB_ID`). A failure
/// is returned, not an error: the checkpoint is written either way, and the user resubmits.
pub fn requeue_slurm_job() -> Requeue {
    requeue_with("scontrol", std::env::var("SLURM_JOB_ID").ok().as_deref())
}

/// [`requeue_slurm_job`] with the `scontrol` program and the job id given.
fn requeue_with(scontrol: &str, job: Option<&str>) -> Requeue {
    let Some(job) = job else { return Requeue::NotASlurmJob };
    let failed = |why: String| Requeue::Failed { job: job.to_string(), why };
    match Command::new(scontrol).args(["requeue", job]).status() {
        Ok(s) if s.success() => Requeue::Requeued { job: job.to_string() },
        Ok(s) => failed(format!("`scontrol requeue {job}` failed ({s})")),
        Err(e) => failed(format!("cannot run scontrol ({e})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_slurm_nothing_is_requeued_and_the_message_says_how_to_continue() {
        let r = requeue_with("scontrol", None);
        assert_eq!(r, Requeue::NotASlurmJob);
        assert!(!r.requeued());
        assert!(r.to_string().contains("SLURM_JOB_ID is not set") && r.to_string().contains("--resume"), "{r}");
    }

    #[test]
    fn scontrol_is_run_with_the_job_and_its_failures_are_reported() {
        let r = requeue_with("true", Some("42"));
        assert!(r.requeued(), "{r}");
        assert_eq!(
            r.to_string(),
            "requeued Slurm job 42 (`scontrol requeue 42`); it continues the run with --resume auto"
        );
        let r = requeue_with("false", Some("42"));
        assert!(!r.requeued());
        assert!(r.to_string().starts_with("--requeue: `scontrol requeue 42` failed (exit status: 1)"), "{r}");
        let r = requeue_with("/nonexistent/scontrol", Some("42"));
        assert!(r.to_string().starts_with("--requeue: cannot run scontrol ("), "{r}");
        assert!(r.to_string().ends_with("resubmit the job to continue"), "{r}");
    }
}
