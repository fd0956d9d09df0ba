/* Microbenchmarks for Hong & Kim device calibration (autotune/calibration/microbench.py).
 * Every memory kernel makes each work-item's loads dependent (the next address uses the
 * loaded value), so a work-item has one load in flight and the time per round exposes
 * latency or, with enough warps in flight, the departure delay between warps' requests. */

/* Memory latency: one work-item follows a random single-cycle permutation (next[p]). */
__kernel void chase(__global const uint* next, const uint start, const int steps,
                    __global uint* out) {
    uint p = start;
    for (int i = 0; i < steps; ++i) p = next[p];
    out[get_global_id(0)] = p;
}

/* Coalesced stream: word (base + gid * lane_stride) each round, base += round_stride.
 * GPU: lane_stride 1, round_stride = work-items (lanes of a warp read consecutive words).
 * CPU: lane_stride = region, round_stride 1 (each work-item, run serially by PoCL, walks its
 * own consecutive words). `data` holds zeros, so v only makes the next address dependent. */
__kernel void stream_coal(__global const uint* data, const uint mask, const uint lane_stride,
                          const uint round_stride, const int iters, __global uint* out) {
    uint gid = get_global_id(0);
    uint base = gid * lane_stride;
    for (int k = 0; k < iters; ++k) {
        uint v = data[base & mask];
        base += round_stride + v;
    }
    out[gid] = base;
}

/* Uncoalesced stream: every lane reads a pseudo-random word each round (a cache line of its
 * own, far from its neighbours'); `data` holds zeros, v makes the next address dependent. */
__kernel void stream_uncoal(__global const uint* data, const uint mask, const int iters,
                            __global uint* out) {
    uint gid = get_global_id(0);
    uint h = gid * 2654435761u + 12345u;
    for (int k = 0; k < iters; ++k) {
        uint v = data[(h ^ (h >> 15)) & mask];
        h = h * 1664525u + 1013904223u + v;
    }
    out[gid] = h;
}

/* Compute issue rate: CHAINS independent dependent multiply-add chains per work-item, no
 * memory. Written x * a + b (built with -cl-mad-enable, contracted to one FMA where the
 * device has one) rather than fma(): PoCL's CPU fma() is a slow library call. */
#define CHAINS 8
__kernel void fma_chain(const int iters, const float a, const float b, __global float* out) {
    uint gid = get_global_id(0);
    float x[CHAINS];
    for (int c = 0; c < CHAINS; ++c) x[c] = (float)(gid + c) * 1e-7f;
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c) x[c] = x[c] * a + b;
    }
    float s = 0.0f;
    for (int c = 0; c < CHAINS; ++c) s += x[c];
    out[gid] = s;
}

/* Effective read bandwidth: float4 number (gid * lane_stride + k * round_stride), strides as
 * in stream_coal (GPU: interleaved lanes; CPU: one contiguous chunk per work-item), summed
 * so the loads cannot be dropped. */
__kernel void read_bw(__global const float4* src, const uint lane_stride,
                      const uint round_stride, const int per_item, __global float* out) {
    uint gid = get_global_id(0);
    float4 s = (float4)(0.0f);
    for (int k = 0; k < per_item; ++k) s += src[gid * lane_stride + (uint)k * round_stride];
    out[gid] = s.x + s.y + s.z + s.w;
}
