/* logitscope: a cblas_sgemm that sends matrix-vector products to cblas_sgemv.
 *
 * Why: MLX's CPU matmul always calls cblas_sgemm, also for one row of activations times a
 * weight matrix (every decode step, and the output head of every prompt). OpenBLAS's x86 builds
 * run such an M = 1 (or N = 1) gemm through the full gemm driver, which packs the whole weight
 * matrix first: 3.6-5.4x slower than cblas_sgemv on a 32,000 x 384 output head. OpenBLAS has a
 * build option that does this forwarding (GEMM_GEMV_FORWARD), but not on x86. This file is
 * loaded into the process's global scope before OpenBLAS, so MLX binds cblas_sgemm here; every
 * other call goes to OpenBLAS's own cblas_sgemm, whose address logitscope_gemv_forward_init()
 * receives (as well as cblas_sgemv's) from engine/gemv_forward.py.
 */

enum { ROW_MAJOR = 101, COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int,
                         const float *, int, float, float *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);

static sgemm_fn real_sgemm;
static sgemv_fn real_sgemv;
static long forwarded_calls;

void logitscope_gemv_forward_init(void *sgemm, void *sgemv) {
    real_sgemm = (sgemm_fn)sgemm;
    real_sgemv = (sgemv_fn)sgemv;
}

/* How many calls went to sgemv: lets tests check the forwarding really happens. */
long logitscope_gemv_forward_count(void) { return __atomic_load_n(&forwarded_calls, __ATOMIC_RELAXED); }

/* The sgemm every other call goes to: lets the loader report which library does the work. */
void *logitscope_gemv_forward_target(void) { return (void *)real_sgemm; }

void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (order == COL_MAJOR) { /* column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T */
        int swap = trans_a; trans_a = trans_b; trans_b = swap;
        swap = m; m = n; n = swap;
        swap = lda; lda = ldb; ldb = swap;
        const float *other = a; a = b; b = other;
        order = ROW_MAJOR;
    }
    int a_plain = trans_a == NO_TRANS, b_plain = trans_b == NO_TRANS;
    if (k > 0 && m == 1) { /* c (1 x n, contiguous) = alpha * (row of op(A)) op(B) + beta * c */
        int a_step = a_plain ? 1 : lda;
        if (b_plain) real_sgemv(ROW_MAJOR, TRANS, k, n, alpha, b, ldb, a, a_step, beta, c, 1);
        else real_sgemv(ROW_MAJOR, NO_TRANS, n, k, alpha, b, ldb, a, a_step, beta, c, 1);
    } else if (k > 0 && n == 1) { /* c (m x 1, stride ldc) = alpha * op(A) (column of op(B)) + beta * c */
        int b_step = b_plain ? ldb : 1;
        if (a_plain) real_sgemv(ROW_MAJOR, NO_TRANS, m, k, alpha, a, lda, b, b_step, beta, c, ldc);
        else real_sgemv(ROW_MAJOR, TRANS, k, m, alpha, a, lda, b, b_step, beta, c, ldc);
    } else {
        real_sgemm(order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    __atomic_add_fetch(&forwarded_calls, 1, __ATOMIC_RELAXED);
}
