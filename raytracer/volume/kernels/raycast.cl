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
// One ray per work-item, scalar code except the colour: a GPU (or Intel's CPU runtime, which
// packs work-items into SIMD lanes by itself) runs it as it is. The lookup-table lerp and the
// accumulation are one float4 operation each (same arithmetic per channel, same image).
// raycast_packet.cl's kernel (built with -DPACKET) casts a packet of rays per work-item in
// explicit vector lanes instead (CPU runtimes; which one a device runs is measured).
//
// The host prepends raytracer/device/kernels/rtmath.cl (FMIN, FMAX, FABS, SQRT) and builds with
// -DINLINE_MATH on PoCL, whose OpenCL builtins are out-of-line calls on this CPU (see
// rtmath.cl): 1.6x per frame here. OpenCL builtins stay on every other driver.
//
// Voxels: with -DBYTE_CELLS (8-bit volumes) each uint holds the bytes of the 2x2 cell corners
// (x, y) (x+1, y) (x, y+1) (x+1, y+1) of one z, so a trilinear sample loads 2 words, not 8
// floats; byte * vscale is the host's normalized value bit for bit. Otherwise the voxels are
// normalized floats (vscale unused). VOXEL_INDEX (uint below 2^32 voxels, else ulong) indexes
// them: a 64-bit index halves the lanes of each gather on a SIMD CPU.
//
// Empty-space skipping: each block (of 4^3 voxels by default) carries r, the half-width of the
// largest cube of (2r - 1)^3 blocks around it that the transfer function shows nothing in
// (0: the block is not empty). A sample in a block with r > 0 jumps to the first lattice sample
// past that cube's exit (clipped to the owned box, less a rounding tolerance; a sample that
// lands short is re-checked), so no sample with non-zero opacity is ever skipped and the image
// is unchanged. One lookup per block a ray enters; none while it stays in a non-empty block.
// r is stored as an int: x86 has no byte gather, and int lookups take 9 % less per frame than
// bytes on Intel's CPU runtime (measured).

#pragma OPENCL FP_CONTRACT OFF

// (only this kernel rounds; the rest of the math macros are rtmath.cl's)
#ifdef INLINE_MATH
#define FLOOR(x) __builtin_floorf(x)
#define CEIL(x) __builtin_ceilf(x)
#else
#define FLOOR(x) floor(x)
#define CEIL(x) ceil(x)
#endif
#define IMIN(a, b) ((a) < (b) ? (a) : (b)) /* integer min/max: plain code on every driver */
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP01(x) FMIN(FMAX(x, 0.0f), 1.0f)
#ifdef BYTE_CELLS
typedef uint voxel_t;
#define LEVEL(w, byte) ((float)(((w) >> (8 * (byte))) & 0xffu) * vscale)
#else
typedef float voxel_t;
#endif

// a + w (b - a), and the trilinear blend of a cell's corner values at fractions (gx, gy, gz)
// in one fixed order: plain expressions, so float and floatN alike (raycast_packet.cl's lanes)
#define LERP(a, b, w) ((a) + (w) * ((b) - (a)))
#define TRILINEAR(v000, v100, v010, v110, v001, v101, v011, v111, gx, gy, gz)            \
    LERP(LERP(LERP(v000, v100, gx), LERP(v010, v110, gx), gy),                           \
         LERP(LERP(v001, v101, gx), LERP(v011, v111, gx), gy), gz)

// Exit parameter of a ray (origin o, inverse direction inv) from [lo, hi] along one axis.
inline float exit_t(float o, float d, float inv, float lo, float hi)
{
    return d > 0.0f ? (hi - o) * inv : (d < 0.0f ? (lo - o) * inv : INFINITY);
}

// The arguments of both caster kernels (this one and raycast_packet.cl's): the host passes the
// same list to whichever its launch runs
#define RAYCAST_ARGS                                                                          \
    __global const voxel_t* data, float vscale, int4 gorg, int4 gdim, int4 vdim,             \
    float4 blo, float4 bhi,                                                                   \
    __global const int* dist, int4 borg, int4 bdim, int block_shift, int skip_empty,          \
    __global const float4* lut, int lut_n,                                                    \
    float4 eye, float4 top_left, float4 du, float4 dv, float4 vox_origin, float4 inv_spacing, \
    int width, int height, float dt, float ert,                                               \
    __global float4* image, __global uint2* counters

__kernel void raycast(RAYCAST_ARGS)
{
    int x = get_global_id(0);
    int y = get_global_id(1);
    if (x >= width || y >= height)
        return;
    int pix = y * width + x;
    float fx = (float)x + 0.5f, fy = (float)y + 0.5f;
    float dwx = top_left.x + fx * du.x + fy * dv.x;
    float dwy = top_left.y + fx * du.y + fy * dv.y;
    float dwz = top_left.z + fx * du.z + fy * dv.z;
    float len = SQRT(dwx * dwx + dwy * dwy + dwz * dwz);
    float dx = dwx / len * inv_spacing.x, dy = dwy / len * inv_spacing.y, dz = dwz / len * inv_spacing.z;
    float ox = (eye.x - vox_origin.x) * inv_spacing.x;
    float oy = (eye.y - vox_origin.y) * inv_spacing.y;
    float oz = (eye.z - vox_origin.z) * inv_spacing.z;
    float ix = 1.0f / dx, iy = 1.0f / dy, iz = 1.0f / dz;
    float ax = (0.0f - ox) * ix, bx = ((float)(vdim.x - 1) - ox) * ix;
    float ay = (0.0f - oy) * iy, by = ((float)(vdim.y - 1) - oy) * iy;
    float az = (0.0f - oz) * iz, bz = ((float)(vdim.z - 1) - oz) * iz;
    float t0 = FMAX(FMAX(FMAX(FMIN(ax, bx), FMIN(ay, by)), FMIN(az, bz)), 0.0f);
    float t1 = FMIN(FMIN(FMAX(ax, bx), FMAX(ay, by)), FMAX(az, bz));
    ax = (blo.x - ox) * ix; bx = (bhi.x - ox) * ix;
    ay = (blo.y - oy) * iy; by = (bhi.y - oy) * iy;
    az = (blo.z - oz) * iz; bz = (bhi.z - oz) * iz;
    float tb0 = FMAX(FMAX(FMAX(FMIN(ax, bx), FMIN(ay, by)), FMIN(az, bz)), t0);
    float tb1 = FMIN(FMIN(FMAX(ax, bx), FMAX(ay, by)), FMAX(az, bz));
    float4 acc = (float4)(0.0f, 0.0f, 0.0f, 0.0f);
    uint taken = 0, skipped = 0;
    if (t1 >= t0 && tb1 >= tb0) {
        int k_end = (int)CEIL((tb1 - t0) / dt) + 1;
        int k = IMAX((int)FLOOR((tb0 - t0) / dt) - 1, 0);
        int cxm = vdim.x - 2, cym = vdim.y - 2, czm = vdim.z - 2;
        VOXEL_INDEX sy = (VOXEL_INDEX)gdim.x, sz = (VOXEL_INDEX)gdim.x * (VOXEL_INDEX)gdim.y;
        float lscale = (float)(lut_n - 1);
        float inv_dt = 1.0f / dt;
        int lbx = -1, lby = -1, lbz = -1; // the block last found not empty
        for (; k <= k_end; k++) {
            float t = t0 + (float)k * dt;
            float px = ox + t * dx, py = oy + t * dy, pz = oz + t * dz;
            if (!(px >= blo.x && px < bhi.x && py >= blo.y && py < bhi.y && pz >= blo.z && pz < bhi.z))
                continue;
            // (int) truncates toward 0: owned p >= -eps, so this is floor clamped to [0, N-2]
            int cx = IMIN((int)px, cxm), cy = IMIN((int)py, cym), cz = IMIN((int)pz, czm);
            int bx = cx >> block_shift, by = cy >> block_shift, bz = cz >> block_shift;
            if (skip_empty && (bx != lbx || by != lby || bz != lbz)) {
                int r = dist[((bz - borg.z) * bdim.y + (by - borg.y)) * bdim.x + (bx - borg.x)];
                if (r > 0) {
                    int sx0 = (bx - r + 1) << block_shift, sx1 = (bx + r) << block_shift;
                    int sy0 = (by - r + 1) << block_shift, sy1 = (by + r) << block_shift;
                    int sz0 = (bz - r + 1) << block_shift, sz1 = (bz + r) << block_shift;
                    float te = FMIN(FMIN(
                        exit_t(ox, dx, ix, FMAX((float)sx0, blo.x), FMIN((float)sx1, bhi.x)),
                        exit_t(oy, dy, iy, FMAX((float)sy0, blo.y), FMIN((float)sy1, bhi.y))),
                        exit_t(oz, dz, iz, FMAX((float)sz0, blo.z), FMIN((float)sz1, bhi.z)));
                    // first lattice sample past the exit, less a tolerance far above te's
                    // rounding error: a sample that lands short is re-checked and skipped
                    // again, none past the empty cube is ever skipped
                    float tol = 1e-5f * (FABS(te) + 1.0f);
                    int kn = IMAX((int)CEIL((te - tol - t0) * inv_dt), k + 1);
                    skipped += (uint)(kn - k);
                    k = kn - 1;
                    continue;
                }
                lbx = bx; lby = by; lbz = bz; // not empty: unchecked until the next block
            }
            float gx = CLAMP01(px - (float)cx);
            float gy = CLAMP01(py - (float)cy);
            float gz = CLAMP01(pz - (float)cz);
            VOXEL_INDEX i000 = (VOXEL_INDEX)(cz - gorg.z) * sz + (VOXEL_INDEX)(cy - gorg.y) * sy
                               + (VOXEL_INDEX)(cx - gorg.x);
#ifdef BYTE_CELLS
            uint w0 = data[i000], w1 = data[i000 + sz];
            float v000 = LEVEL(w0, 0), v100 = LEVEL(w0, 1), v010 = LEVEL(w0, 2), v110 = LEVEL(w0, 3);
            float v001 = LEVEL(w1, 0), v101 = LEVEL(w1, 1), v011 = LEVEL(w1, 2), v111 = LEVEL(w1, 3);
#else
            float v000 = data[i000], v100 = data[i000 + 1];
            float v010 = data[i000 + sy], v110 = data[i000 + sy + 1];
            float v001 = data[i000 + sz], v101 = data[i000 + sz + 1];
            float v011 = data[i000 + sz + sy], v111 = data[i000 + sz + sy + 1];
#endif
            float v = TRILINEAR(v000, v100, v010, v110, v001, v101, v011, v111, gx, gy, gz);
            float u = CLAMP01(v) * lscale;
            int j = IMIN((int)u, lut_n - 2);
            float w = u - (float)j;
            float4 la = lut[j], lb = lut[j + 1];
            float4 c = LERP(la, lb, w);
            float wgt = (1.0f - acc.w) * c.w;
            acc += wgt * (float4)(c.x, c.y, c.z, 1.0f);
            taken++;
            if (acc.w >= ert)
                break;
        }
    }
    image[pix] = acc;
    counters[pix] = (uint2)(taken, skipped);
}
