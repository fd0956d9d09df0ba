// Front-to-back emission-absorption ray casting of one brick of a volume.
//
// Seamless by construction: every brick samples the one global lattice t_k = t0 + k*dt along
// each ray (t0 = entry into the WHOLE volume box [0, N-1] in voxel coordinates) and keeps a
// sample only if its position lies in the brick's half-open box [blo, bhi); all bricks run this
// same code on the same inputs, so each lattice sample belongs to exactly one brick and reads
// the same trilinear value there (the brick's data has one ghost voxel layer on its upper faces).
// Faces on the volume boundary are widened by a small epsilon on the host so rounding never
// drops the first or last sample of a ray.
//
// Empty-space skipping: a sample in a block flagged empty (transfer-function opacity 0 over the
// block's value range) jumps to the lattice sample just before the block's exit and re-checks,
// so no sample with non-zero opacity is ever skipped and the image is unchanged.

#pragma OPENCL FP_CONTRACT OFF

inline float2 slab(float3 o, float3 d, float3 lo, float3 hi)
{
    float3 inv = (float3)(1.0f) / d;
    float3 ta = (lo - o) * inv;
    float3 tb = (hi - o) * inv;
    float3 tmin = fmin(ta, tb);
    float3 tmax = fmax(ta, tb);
    return (float2)(fmax(fmax(tmin.x, tmin.y), tmin.z), fmin(fmin(tmax.x, tmax.y), tmax.z));
}

inline float4 lut_lookup(__global const float4* lut, int n, float v)
{
    float u = v * (float)(n - 1);
    int j = clamp((int)floor(u), 0, n - 2);
    float w = clamp(u - (float)j, 0.0f, 1.0f);
    float4 a = lut[j];
    float4 b = lut[j + 1];
    return a + w * (b - a);
}

__kernel void raycast(
    __global const float* data,      // brick voxels with ghosts, [z][y][x]
    int4 gorg,                       // global voxel index of data[0][0][0] (x, y, z)
    int4 gdim,                       // data dims (x, y, z)
    int4 vdim,                       // whole volume dims in voxels (x, y, z)
    float4 blo, float4 bhi,          // owned half-open box, voxel coordinates
    __global const uchar* empty,     // empty-block flags, [bz][by][bx]
    int4 borg, int4 bdim, int block, int skip_empty,
    __global const float4* lut, int lut_n,
    float4 eye, float4 top_left, float4 du, float4 dv,  // world camera basis
    float4 vox_origin, float4 inv_spacing,               // world -> voxel coordinates
    int width, int height, float dt, float ert,
    __global float4* image, __global uint2* counters)
{
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x >= width || y >= height)
        return;
    int pix = y * width + x;

    float3 dw = top_left.xyz + ((float)x + 0.5f) * du.xyz + ((float)y + 0.5f) * dv.xyz;
    float len = sqrt(dw.x * dw.x + dw.y * dw.y + dw.z * dw.z);
    float3 d = (dw / len) * inv_spacing.xyz;              // voxels per world unit of t
    float3 o = (eye.xyz - vox_origin.xyz) * inv_spacing.xyz;

    float3 vmax = convert_float3(vdim.xyz - 1);
    float2 tv = slab(o, d, (float3)(0.0f), vmax);
    float t0 = fmax(tv.x, 0.0f);
    float2 tb = slab(o, d, blo.xyz, bhi.xyz);
    tb.x = fmax(tb.x, t0);
    float4 acc = (float4)(0.0f);
    uint taken = 0, skipped = 0;
    if (!(tv.y >= t0) || !(tb.y >= tb.x)) {
        image[pix] = acc;
        counters[pix] = (uint2)(0, 0);
        return;
    }
    int k_end = (int)ceil((tb.y - t0) / dt) + 1;
    int k = max((int)floor((tb.x - t0) / dt) - 1, 0);
    int3 cmax = vdim.xyz - 2;
    while (k <= k_end) {
        float t = t0 + (float)k * dt;
        float3 p = o + t * d;
        if (!(p.x >= blo.x && p.x < bhi.x && p.y >= blo.y && p.y < bhi.y
              && p.z >= blo.z && p.z < bhi.z)) {
            k++;
            continue;
        }
        int3 c = clamp(convert_int3(floor(p)), (int3)(0), cmax);
        if (skip_empty) {
            int3 bg = c / block;
            int3 b = bg - borg.xyz;
            if (empty[(b.z * bdim.y + b.y) * bdim.x + b.x]) {
                float3 bl = fmax(convert_float3(bg * block), blo.xyz);
                float3 bh = fmin(convert_float3(bg * block + block), bhi.xyz);
                float3 face = select(bl, bh, d > 0.0f);
                float3 tf = (face - o) / d;
                tf = select(tf, (float3)(INFINITY), d == 0.0f);
                float t_exit = fmin(fmin(tf.x, tf.y), tf.z);
                int kn = max((int)ceil((t_exit - t0) / dt) - 1, k + 1);
                skipped += (uint)(kn - k);
                k = kn;
                continue;
            }
        }
        float3 f = clamp(p - convert_float3(c), 0.0f, 1.0f);
        int3 l = c - gorg.xyz;
        size_t sx = 1, sy = (size_t)gdim.x, sz = (size_t)gdim.x * (size_t)gdim.y;
        size_t i000 = (size_t)l.z * sz + (size_t)l.y * sy + (size_t)l.x;
        float v000 = data[i000], v100 = data[i000 + sx];
        float v010 = data[i000 + sy], v110 = data[i000 + sy + sx];
        float v001 = data[i000 + sz], v101 = data[i000 + sz + sx];
        float v011 = data[i000 + sz + sy], v111 = data[i000 + sz + sy + sx];
        float c00 = v000 + f.x * (v100 - v000);
        float c10 = v010 + f.x * (v110 - v010);
        float c01 = v001 + f.x * (v101 - v001);
        float c11 = v011 + f.x * (v111 - v011);
        float c0 = c00 + f.y * (c10 - c00);
        float c1 = c01 + f.y * (c11 - c01);
        float v = c0 + f.z * (c1 - c0);
        float4 s = lut_lookup(lut, lut_n, v);
        float w = (1.0f - acc.w) * s.w;
        acc.xyz += w * s.xyz;
        acc.w += w;
        taken++;
        if (ert < 1.0f && acc.w >= ert)
            break;
        k++;
    }
    image[pix] = acc;
    counters[pix] = (uint2)(taken, skipped);
}
