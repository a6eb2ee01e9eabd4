//! With the `mpi` feature: compiles the tiny C shim that hands Rust the MPI_IN_PLACE constant
//! (its value differs between OpenMPI and MPICH, and rsmpi does not export it), with the MPI
//! compiler wrapper (`mpicc`, or `$MPICC`) so include paths come from the MPI installation.

fn main() {
    #[cfg(feature = "mpi")]
    {
        println!("cargo:rerun-if-changed=src/dist/in_place.c");
        println!("cargo:rerun-if-env-changed=MPICC");
        let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".into());
        cc::Build::new().compiler(mpicc).file("src/dist/in_place.c").compile("trackgnn_mpi_shim");
    }
}
