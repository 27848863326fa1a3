/*
 * topo.c: process topologies. Communicators carry none yet (Cart_create and
 * Graph_create are not implemented), so Topo_test reports MPI_UNDEFINED;
 * Dims_create is the standard's balanced factorization, needing no
 * communicator.
 */
#include "internal.h"

int PMPI_Topo_test(MPI_Comm comm, int *status) {
    MWMPI_COMM(c, comm, "MPI_Topo_test");
    if (status == NULL) return mwmpi_raise(c, MPI_ERR_ARG, "MPI_Topo_test", "NULL argument");
    *status = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

/* Dims_create (MPI-5.0 8.5.2): fills the zero entries of dims so their
 * product with the given ones is nnodes, as close to each other as can be,
 * in non-increasing order. */
int PMPI_Dims_create(int nnodes, int ndims, int dims[]) {
    static const char routine[] = "MPI_Dims_create";
    if (nnodes < 0 || ndims < 0 || (ndims > 0 && dims == NULL))
        return mwmpi_raise(NULL, MPI_ERR_ARG, routine, "bad nnodes, ndims or dims");
    int fixed = 1, free_dims = 0;
    for (int i = 0; i < ndims; i++) {
        if (dims[i] < 0) return mwmpi_raise(NULL, MPI_ERR_DIMS, routine, "dims[%d] is negative", i);
        if (dims[i] > 0) fixed *= dims[i];
        else free_dims++;
    }
    if (free_dims == 0) {
        if (fixed != nnodes) return mwmpi_raise(NULL, MPI_ERR_DIMS, routine, "the dims' product is not nnodes");
        return MPI_SUCCESS;
    }
    if (fixed == 0 || nnodes % fixed != 0)
        return mwmpi_raise(NULL, MPI_ERR_DIMS, routine, "nnodes is not a multiple of the given dims");
    int left = nnodes / fixed;
    int out[64];
    if (free_dims > 64) return mwmpi_raise(NULL, MPI_ERR_DIMS, routine, "more than 64 dimensions to fill");
    for (int i = 0; i < free_dims; i++) out[i] = 1;
    /* Prime factors, largest first, each to the smallest dimension so far. */
    int factors[32], nf = 0;
    for (int p = 2; left > 1 && nf < 32;) {
        if (left % p == 0) {
            factors[nf++] = p;
            left /= p;
        } else {
            p = p * p > left ? left : p + 1;
        }
    }
    for (int f = nf - 1; f >= 0; f--) {
        int smallest = 0;
        for (int i = 1; i < free_dims; i++)
            if (out[i] < out[smallest]) smallest = i;
        out[smallest] *= factors[f];
    }
    /* Non-increasing order. */
    for (int i = 0; i < free_dims; i++)
        for (int j = i + 1; j < free_dims; j++)
            if (out[j] > out[i]) {
                int tmp = out[i];
                out[i] = out[j];
                out[j] = tmp;
            }
    for (int i = 0, k = 0; i < ndims; i++)
        if (dims[i] == 0) dims[i] = out[k++];
    return MPI_SUCCESS;
}
