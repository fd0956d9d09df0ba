/* Vector math of the tracer kernels, included before every other kernel file.
 *
 * On PoCL the host builds with -DINLINE_MATH: the pip PoCL 3.0 links a builtin library built
 * for a CPU with more features than the LLVM CPU name it compiles the kernel for (AVX-512
 * library, znver3 kernel here), so its inliner refuses every OpenCL builtin ("conflicting
 * attributes") and fmin/dot/cross/normalize become out-of-line calls: 16 calls per node visit,
 * 2.2x the traversal time (see docs/design-notes.md). Under INLINE_MATH the hot path uses
 * plain expressions and clang builtins that compile to instructions; everywhere else (NVIDIA
 * and other GPU drivers, and the PTX that tools/count_ptx.py counts) the OpenCL builtins stay,
 * but for dot products and normalize, written out on every driver (below).
 * tests/test_kernel_calls.py checks the compiled PoCL kernels for calls. */

/* every helper is inlined, trace() included (PoCL's and clang's cost models would keep the
 * 8-wide traversal out of line) */
#define ALWAYS_INLINE inline __attribute__((always_inline))

#ifdef INLINE_MATH
#define FMIN(a, b) ((a) < (b) ? (a) : (b)) /* float or floatN (component-wise ?:) */
#define FMAX(a, b) ((a) > (b) ? (a) : (b))
#define FABS(a) ((a) < 0.0f ? -(a) : (a))
#define SQRT(x) __builtin_sqrtf(x)
#define CROSS3(a, b) ((float3)((a).y * (b).z - (a).z * (b).y, (a).z * (b).x - (a).x * (b).z, \
                               (a).x * (b).y - (a).y * (b).x))
#define COS(x) __builtin_cosf(x)
#define SIN(x) __builtin_sinf(x)
/* the i-th eight floats of a private array: PoCL 3.0 on an AMD Zen 4 called vload8 out of line
 * (shadow_packet.cl, once a packet) */
#define VLOAD8(i, p) ((float8)((p)[8 * (i)], (p)[8 * (i) + 1], (p)[8 * (i) + 2], \
                               (p)[8 * (i) + 3], (p)[8 * (i) + 4], (p)[8 * (i) + 5], \
                               (p)[8 * (i) + 6], (p)[8 * (i) + 7]))
/* any lane of an 8-lane mask (a node's eight children, traverse.cl; a packet's eight rays at
 * a child box, *_packet.cl): one OR reduction where the compiler has it (a mask test; the
 * lanes OR-ed one by one are extracted one at a time). PoCL 3.1, one compute unit, 1280x720,
 * the same images: one ray per work-item, primary 10-13 %, shadow 7-10 %, AO 4 % faster;
 * primary packets 15-20 %, shadow packets 12 %. */
#if __has_builtin(__builtin_reduce_or)
#define ANY8(v) (__builtin_reduce_or(v) < 0)
#else
#define ANY8(v) (((v).s0 | (v).s1 | (v).s2 | (v).s3 | (v).s4 | (v).s5 | (v).s6 | (v).s7) < 0)
#endif
/* an 8-lane mask as the bits of one int (lane k: bit k) where the compiler has AVX's movmsk:
 * the traversal's per-child branches then test bits of one register where each one extracted
 * its lane from the mask vector. PoCL 3.1, one compute unit, 1280x720, the same images: AO
 * 9-13 %, one-ray primary 8-11 %, shadow 7 % faster (dragon, sibenik). */
#if defined(__AVX__) && __has_builtin(__builtin_ia32_movmskps256)
#define LANE_BITS(v) __builtin_ia32_movmskps256(as_float8(v))
#define LANE(v, bits, C, BIT) ((bits) & (BIT))
/* the lanes of an 8-int vector selected by the bits of one int, moved to its lowest lanes in
 * order, where the compiler has AVX-512's compress (an any-hit ray's pushes in one store,
 * traverse.cl) */
#if defined(__AVX512VL__) && __has_builtin(__builtin_ia32_compresssi256_mask)
#define COMPRESS8(v, bits) __builtin_ia32_compresssi256_mask((v), (v), (uchar)(bits))
#endif
#endif
#else
#define FMIN(a, b) fmin(a, b)
#define FMAX(a, b) fmax(a, b)
#define FABS(a) fabs(a)
#define SQRT(x) sqrt(x)
#define CROSS3(a, b) cross(a, b)
#define COS(x) cos(x)
#define SIN(x) sin(x)
#define VLOAD8(i, p) vload8(i, p)
#define ANY8(v) any(v)
#endif

#ifndef LANE_BITS /* elsewhere each child's branch reads its lane of the mask */
#define LANE_BITS(v) 0
#define LANE(v, bits, C, BIT) ((v).C)
#endif

/* written out on every driver: with Intel's dot() the shade phase in sub-groups took 20-56 %
 * longer and the ray phases 0-3 % (one compute unit, 1280x720; 6 dragon pixels 1/255 off) */
#define DOT3(a, b) ((a).x * (b).x + (a).y * (b).y + (a).z * (b).z)

/* v / |v| on every driver: Intel's normalize() builtin (overflow-safe) cost the shadow phase
 * 3-8 % and AO 3-4 % more (one compute unit, 1280x720; the image the same but for 24 dragon
 * pixels, 1/255 off) */
ALWAYS_INLINE float3 normalize3(float3 v) { return v / SQRT(DOT3(v, v)); }

ALWAYS_INLINE float length3(float3 v) { return SQRT(DOT3(v, v)); }

/* x^32 by five squarings (the specular exponent; no pow call on PoCL) */
ALWAYS_INLINE float pow32(float x) {
    x *= x;
    x *= x;
    x *= x;
    x *= x;
    return x * x;
}

/* Display gamma x^(1/2.2) for x in [0, 1]. */
ALWAYS_INLINE float gamma_encode(float x) {
#ifdef INLINE_MATH
    return x > 0.0f ? __builtin_exp2f(__builtin_log2f(x) * (1.0f / 2.2f)) : 0.0f;
#else
    return pow(x, 1.0f / 2.2f);
#endif
}
