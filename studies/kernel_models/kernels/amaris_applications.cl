// The nine applications of Amarís et al. ("A Comparison of GPU Execution Time Prediction using
// Machine Learning and Analytical Modeling"), written in OpenCL C for `autotune bench
// kernel-models`.
//
// "Coalesced" and "uncoalesced" are about dimension 0: the work-items that run in lockstep
// (a warp; Intel's CPU runtime vectorizes along dimension 0). In a coalesced kernel neighbouring
// work-items of dimension 0 touch neighbouring words; in the uncoalesced twin the roles of the
// two dimensions are swapped, so neighbours are a matrix row (n words) apart.
// Shared memory is OpenCL local memory, passed as __local arguments sized by the host (a tile
// of the work-group's side squared, or one float per work-item for the reduction).

// Matrix multiply, global memory, uncoalesced: dimension 0 walks the rows of A and C.
__kernel void MMGU(__global const float *a, __global const float *b, __global float *c,
                   const int n) {
    const int row = get_global_id(0), col = get_global_id(1);
    float sum = 0.0f;
    for (int k = 0; k < n; ++k)
        sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
}

// Matrix multiply, global memory, coalesced: dimension 0 walks the columns of B and C.
__kernel void MMGC(__global const float *a, __global const float *b, __global float *c,
                   const int n) {
    const int row = get_global_id(1), col = get_global_id(0);
    float sum = 0.0f;
    for (int k = 0; k < n; ++k)
        sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
}

// Tiled multiply through local memory; `ty`/`tx` are the tile's row and column of this
// work-item, `row`/`col` its element of C. Both twins below call it.
inline void mm_tiled(__global const float *a, __global const float *b, __global float *c,
                     const int n, __local float *as, __local float *bs, const int ty,
                     const int tx, const int row, const int col, const int tile) {
    float sum = 0.0f;
    for (int t = 0; t < n; t += tile) {
        as[ty * tile + tx] = a[row * n + t + tx];
        bs[ty * tile + tx] = b[(t + ty) * n + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < tile; ++k)
            sum += as[ty * tile + k] * bs[k * tile + tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    c[row * n + col] = sum;
}

// Matrix multiply, local memory, uncoalesced: dimension 0 is the tile's row.
__kernel void MMSU(__global const float *a, __global const float *b, __global float *c,
                   const int n, __local float *as, __local float *bs) {
    mm_tiled(a, b, c, n, as, bs, get_local_id(0), get_local_id(1), get_global_id(0),
             get_global_id(1), get_local_size(0));
}

// Matrix multiply, local memory, coalesced: dimension 0 is the tile's column.
__kernel void MMSC(__global const float *a, __global const float *b, __global float *c,
                   const int n, __local float *as, __local float *bs) {
    mm_tiled(a, b, c, n, as, bs, get_local_id(1), get_local_id(0), get_global_id(1),
             get_global_id(0), get_local_size(0));
}

// Matrix add, uncoalesced: neighbours in dimension 0 are a row apart.
__kernel void MAU(__global const float *a, __global const float *b, __global float *c,
                  const int n) {
    const int i = get_global_id(0) * n + get_global_id(1);
    c[i] = a[i] + b[i];
}

// Matrix add, coalesced.
__kernel void MAC(__global const float *a, __global const float *b, __global float *c,
                  const int n) {
    const int i = get_global_id(1) * n + get_global_id(0);
    c[i] = a[i] + b[i];
}

__kernel void vAdd(__global const float *a, __global const float *b, __global float *c) {
    const int i = get_global_id(0);
    c[i] = a[i] + b[i];
}

// Dot product: one product per work-item, a tree reduction in local memory (a power-of-two
// work-group), one partial sum per work-group for the host to add.
__kernel void dotP(__global const float *a, __global const float *b, __global float *partial,
                   __local float *scratch) {
    const int lid = get_local_id(0);
    scratch[lid] = a[get_global_id(0)] * b[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = get_local_size(0) / 2; step > 0; step /= 2) {
        if (lid < step)
            scratch[lid] += scratch[lid + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        partial[get_group_id(0)] = scratch[0];
}

// Maximum subarray, first pass: each work-item reduces its contiguous interval of n / threads
// integers to five numbers (sum, best prefix, best suffix, best subarray, largest element) that
// a second pass on the host combines in order. Every interval is non-empty.
__kernel void MSA(__global const int *x, const int n, __global int *out) {
    const int len = n / get_global_size(0);
    const int start = get_global_id(0) * len;
    int sum = 0, best_prefix = x[start], min_prefix = 0, best = x[start], run = 0;
    int largest = x[start];
    for (int i = start; i < start + len; ++i) {
        const int v = x[i];
        min_prefix = min(min_prefix, sum);  // over the prefixes that end before i
        sum += v;
        best_prefix = max(best_prefix, sum);
        run = max(run + v, v);
        best = max(best, run);
        largest = max(largest, v);
    }
    __global int *o = out + 5 * get_global_id(0);
    o[0] = sum;
    o[1] = best_prefix;
    o[2] = sum - min_prefix;  // best suffix: the total less the smallest proper prefix
    o[3] = best;
    o[4] = largest;
}
