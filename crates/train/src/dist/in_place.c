/* MPI_IN_PLACE for Rust: a macro in OpenMPI (a pointer to a global), a constant in MPICH. */
#include <mpi.h>

void *trackgnn_mpi_in_place(void) { return MPI_IN_PLACE; }
