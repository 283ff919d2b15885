/* logitscope's elementwise prefill kernels for MLX's CPU backend (see engine/native.py).
 *
 * MLX's Linux CPU wheel runs elementwise work one value at a time (its exp is a scalar library
 * call, and its compiled kernels are built without vector instructions). These loops compute
 * the same maths as engine/fastmath.py's compiled kernels (the same exponential: a degree-6
 * polynomial times a power of two taken from the float's bits) but vectorized: GCC and clang
 * emit AVX-512, AVX2 and baseline versions and pick one when the library loads.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define VECTORIZED __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef VECTORIZED
#define VECTORIZED
#endif

/* exp(x) for x <= 0 (and -inf), ~3e-7 relative; below e**-87 it flushes to 0. */
static inline float exp_nonpositive(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2**23: adding it rounds to an integer in the low bits */
    float shifted = x * 1.4426950408889634f + magic;
    float n = shifted - magic;
    float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
    float poly = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    bits = (bits - (0x4B400000 - 127)) << 23; /* 2**n as a float's bits */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : poly * scale;
}

/* out = silu(gate) * x, with sigmoid(g) = 1 / (1 + e) for g >= 0, e / (1 + e) below, e = exp(-|g|). */
VECTORIZED
void logitscope_swiglu_f32(const float *restrict gate, const float *restrict x, float *restrict out, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        float e = exp_nonpositive(-fabsf(g));
        float sigmoid = (g >= 0.0f ? 1.0f : e) / (1.0f + e);
        out[i] = g * sigmoid * x[i];
    }
}

/* Softmax of each row of a (rows, cols) float32 matrix, in place.
 *
 * Causal blocks: with first_visible >= 0, row r is query (r % period) of a block of `period`
 * queries and sees columns [0, first_visible + r % period], the rest become 0. With
 * first_visible < 0 every column is seen. */
VECTORIZED
void logitscope_softmax_rows_f32(float *restrict scores, int64_t rows, int64_t cols, int64_t first_visible,
                                 int64_t period) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = scores + r * cols;
        int64_t seen = first_visible < 0 ? cols : first_visible + r % period + 1;
        if (seen > cols) seen = cols;
        float top = -INFINITY;
#pragma omp simd reduction(max : top)
        for (int64_t j = 0; j < seen; j++) top = row[j] > top ? row[j] : top;
        float total = 0.0f;
#pragma omp simd reduction(+ : total)
        for (int64_t j = 0; j < seen; j++) {
            float e = exp_nonpositive(row[j] - top);
            row[j] = e;
            total += e;
        }
        float inverse = 1.0f / total;
        for (int64_t j = 0; j < seen; j++) row[j] *= inverse;
        for (int64_t j = seen; j < cols; j++) row[j] = 0.0f;
    }
}
