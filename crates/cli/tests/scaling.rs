//! `trackgnn scaling` and `bench allreduce`: argument errors name what is wrong and how to fix
//! it (the measurements themselves are timed and not run here).

use crate::util::{fails, trackgnn};

#[test]
fn scaling_argument_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = fails(trackgnn(d, &["scaling", "--simulate"]));
    assert!(e.contains("--simulate needs --from"), "{e}");
    let e = fails(trackgnn(d, &["scaling", "--graphs", "g", "--out", "o", "--ranks", "2,4"]));
    assert!(e.contains("must include 1"), "{e}");
    let e = fails(trackgnn(d, &["scaling", "--out", "o"]));
    assert!(e.contains("needs --graphs"), "{e}");
    let e = fails(trackgnn(d, &["scaling", "--simulate", "--from", "missing-run"]));
    assert!(e.contains("missing-run"), "{e}");
}

#[cfg(not(feature = "mpi"))]
#[test]
fn without_mpi_more_ranks_and_the_allreduce_bench_say_how_to_build() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let e = fails(trackgnn(d, &["scaling", "--graphs", "g", "--out", "o", "--ranks", "1,2"]));
    assert!(e.contains("--features mpi") && e.contains("--ranks 1"), "{e}");
    let e = fails(trackgnn(d, &["bench", "allreduce"]));
    assert!(e.contains("--features mpi") && e.contains("mpirun -np 2"), "{e}");
}
