/* logitscope: plain cblas_sgemm / cblas_dgemm / cblas_cgemm names for an OpenBLAS whose symbols
 * carry a prefix (scipy-openblas32: scipy_cblas_sgemm, ...).
 *
 * Why: the OpenBLAS on PyPI that brings its own Fortran runtime (scipy-openblas32) renames every
 * symbol so that it can never clash with another BLAS in the process. MLX's libmlx binds the
 * plain names from the global scope when it is loaded, so it would never find that library.
 * This file is loaded globally before MLX and sends each plain name to the prefixed function,
 * whose addresses logitscope_cblas_alias_init() receives from engine/cpu/cblas_alias.py.
 * These three are the only cblas functions libmlx leaves undefined (nm -D --undefined-only).
 */

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);
typedef void (*cgemm_fn)(int, int, int, int, int, int, const void *, const void *, int,
                         const void *, int, const void *, void *, int);

static sgemm_fn real_sgemm;
static dgemm_fn real_dgemm;
static cgemm_fn real_cgemm;

void logitscope_cblas_alias_init(void *sgemm, void *dgemm, void *cgemm) {
    real_sgemm = (sgemm_fn)sgemm;
    real_dgemm = (dgemm_fn)dgemm;
    real_cgemm = (cgemm_fn)cgemm;
}

/* The sgemm the alias calls: lets the loader report which library does the work. */
void *logitscope_cblas_alias_target(void) { return (void *)real_sgemm; }

void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    real_sgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_dgemm(int order, int trans_a, int trans_b, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb, double beta, double *c, int ldc) {
    real_dgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void cblas_cgemm(int order, int trans_a, int trans_b, int m, int n, int k, const void *alpha,
                 const void *a, int lda, const void *b, int ldb, const void *beta, void *c, int ldc) {
    real_cgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
