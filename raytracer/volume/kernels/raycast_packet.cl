// The ray caster of raycast.cl with a packet of rays per work-item, in explicit vector lanes.
//
// Built with -DPACKET=n (an OpenCL vector width: 2, 4, 8 or 16) and -DPACKET_COLS=c: each
// work-item casts the rays of c x (n / c) adjacent pixels, one per lane of float<n> / int<n>
// values, in lockstep until its last ray ends; a lane whose ray has ended, or whose sample
// lies outside the brick, is masked. Every lane does raycast.cl's arithmetic in raycast.cl's
// order (no contraction), so image and counters are the scalar kernel's bit for bit.
//
// Why: a CPU runtime that runs each work-item as scalar code (PoCL) leaves the core's vector
// units idle, and Intel's runtime packs 16 work-items of a row into its lanes by itself. In
// 4x4 packets both run this kernel faster than the scalar one (bonsai 512², one compute
// unit, three views: PoCL 241 -> 121 ms, Intel 146 -> 102 ms; 16x1 packets 134 and 118 ms):
// square packets keep rays that end together in one packet (slowest lane over the mean:
// 1.21 for 4x4, 1.34 for 16x1). Which kernel a device runs is measured
// (raytracer/device/launches.py).
//
// Loads and colour-table lookups are per lane (fully unrolled loops; left rolled, PoCL spilled
// the vectors to the stack for a variable lane index, 1.6x slower); the rest is vector code.

#ifdef PACKET

#define VEC_(type, n) type##n
#define VEC(type, n) VEC_(type, n)
typedef VEC(float, PACKET) floatp;
typedef VEC(int, PACKET) intp;
typedef VEC(uint, PACKET) uintp;

#ifdef INLINE_MATH
#define TO_INT(v) __builtin_convertvector(v, intp)
#define TO_FLOAT(v) __builtin_convertvector(v, floatp)
#else
#define TO_INT(v) VEC(convert_int, PACKET)(v)
#define TO_FLOAT(v) VEC(convert_float, PACKET)(v)
#endif
#define LANES _Pragma("unroll") for (int l = 0; l < PACKET; l++)
#define LEVELS(w, byte) (TO_FLOAT(((w) >> (8 * (byte))) & 0xffu) * vscale)

// whether any lane of mask m (-1 true, 0 false) is set: on PoCL one OR reduction where the
// compiler has it (a mask test; the lanes OR-ed one by one were shuffled apart at each test:
// bonsai 512², one compute unit, three views, PoCL 3.1: 92.6 -> 87.0 ms, the same image)
inline int any_lane(intp m)
{
#ifdef INLINE_MATH
#if __has_builtin(__builtin_reduce_or)
    return __builtin_reduce_or(m) < 0;
#else
    int r = 0;
    LANES r |= m[l];
    return r < 0;
#endif
#else
    return any(m);
#endif
}

inline floatp sqrt_lanes(floatp x)
{
#ifdef INLINE_MATH
    LANES x[l] = __builtin_sqrtf(x[l]);
    return x;
#else
    return sqrt(x);
#endif
}

// (int)FLOOR(x) and (int)CEIL(x) of raycast.cl for |x| < 2^31
inline intp floor_int(floatp x)
{
    intp i = TO_INT(x);
    return i + (x < TO_FLOAT(i));
}

inline intp ceil_int(floatp x)
{
    intp i = TO_INT(x);
    return i - (x > TO_FLOAT(i));
}

// raycast.cl's exit_t, per lane
inline floatp exit_lanes(float o, floatp d, floatp inv, floatp lo, floatp hi)
{
    return d > 0.0f ? (hi - o) * inv : (d < 0.0f ? (lo - o) * inv : (floatp)INFINITY);
}

__kernel void raycast_packet(RAYCAST_ARGS)
{
    int x0 = get_global_id(0) * PACKET_COLS;
    int y0 = get_global_id(1) * (PACKET / PACKET_COLS);
    if (x0 >= width || y0 >= height)
        return;
    intp xs, ys;
    LANES {
        xs[l] = x0 + l % PACKET_COLS;
        ys[l] = y0 + l / PACKET_COLS;
    }
    floatp fx = TO_FLOAT(xs) + 0.5f, fy = TO_FLOAT(ys) + 0.5f;
    floatp dwx = top_left.x + fx * du.x + fy * dv.x;
    floatp dwy = top_left.y + fx * du.y + fy * dv.y;
    floatp dwz = top_left.z + fx * du.z + fy * dv.z;
    floatp len = sqrt_lanes(dwx * dwx + dwy * dwy + dwz * dwz);
    floatp dx = dwx / len * inv_spacing.x, dy = dwy / len * inv_spacing.y;
    floatp dz = dwz / len * inv_spacing.z;
    float ox = (eye.x - vox_origin.x) * inv_spacing.x;
    float oy = (eye.y - vox_origin.y) * inv_spacing.y;
    float oz = (eye.z - vox_origin.z) * inv_spacing.z;
    floatp ix = 1.0f / dx, iy = 1.0f / dy, iz = 1.0f / dz;
    floatp ax = (0.0f - ox) * ix, bx = ((float)(vdim.x - 1) - ox) * ix;
    floatp ay = (0.0f - oy) * iy, by = ((float)(vdim.y - 1) - oy) * iy;
    floatp az = (0.0f - oz) * iz, bz = ((float)(vdim.z - 1) - oz) * iz;
    floatp t0 = FMAX(FMAX(FMAX(FMIN(ax, bx), FMIN(ay, by)), FMIN(az, bz)), (floatp)0.0f);
    floatp t1 = FMIN(FMIN(FMAX(ax, bx), FMAX(ay, by)), FMAX(az, bz));
    ax = (blo.x - ox) * ix; bx = (bhi.x - ox) * ix;
    ay = (blo.y - oy) * iy; by = (bhi.y - oy) * iy;
    az = (blo.z - oz) * iz; bz = (bhi.z - oz) * iz;
    floatp tb0 = FMAX(FMAX(FMAX(FMIN(ax, bx), FMIN(ay, by)), FMIN(az, bz)), t0);
    floatp tb1 = FMIN(FMIN(FMAX(ax, bx), FMAX(ay, by)), FMAX(az, bz));
    // lanes past the image or whose ray misses the brick take no sample (k > k_end)
    intp hit = (xs < width) & (ys < height) & (t1 >= t0) & (tb1 >= tb0);
    intp k_end = hit ? ceil_int((tb1 - t0) / dt) + 1 : -1;
    intp k = hit ? IMAX(floor_int((tb0 - t0) / dt) - 1, 0) : 0;
    floatp acc_r = 0.0f, acc_g = 0.0f, acc_b = 0.0f, acc_a = 0.0f;
    intp taken = 0, skipped = 0;
    int cxm = vdim.x - 2, cym = vdim.y - 2, czm = vdim.z - 2;
    VOXEL_INDEX sy = (VOXEL_INDEX)gdim.x, sz = (VOXEL_INDEX)gdim.x * (VOXEL_INDEX)gdim.y;
    float lscale = (float)(lut_n - 1);
    float inv_dt = 1.0f / dt;
    intp lbx = -1, lby = -1, lbz = -1; // each lane's block last found not empty
    intp live = k <= k_end;
    while (any_lane(live)) {
        floatp t = t0 + TO_FLOAT(k) * dt;
        floatp px = ox + t * dx, py = oy + t * dy, pz = oz + t * dz;
        intp owned = live & (px >= blo.x) & (px < bhi.x) & (py >= blo.y) & (py < bhi.y)
                     & (pz >= blo.z) & (pz < bhi.z);
        // lanes not sampling read the brick's first cell (every index stays in bounds)
        intp cx = owned ? IMIN(TO_INT(px), cxm) : gorg.x;
        intp cy = owned ? IMIN(TO_INT(py), cym) : gorg.y;
        intp cz = owned ? IMIN(TO_INT(pz), czm) : gorg.z;
        intp jump = 0;
        if (skip_empty) {
            intp bx = cx >> block_shift, by = cy >> block_shift, bz = cz >> block_shift;
            intp look = owned & ((bx != lbx) | (by != lby) | (bz != lbz));
            if (any_lane(look)) {
                intp cube = ((bz - borg.z) * bdim.y + (by - borg.y)) * bdim.x + (bx - borg.x);
                intp r;
                LANES r[l] = dist[look[l] ? cube[l] : 0];
                jump = look & (r > 0);
                if (any_lane(jump)) {
                    floatp sx0 = TO_FLOAT((bx - r + 1) << block_shift);
                    floatp sx1 = TO_FLOAT((bx + r) << block_shift);
                    floatp sy0 = TO_FLOAT((by - r + 1) << block_shift);
                    floatp sy1 = TO_FLOAT((by + r) << block_shift);
                    floatp sz0 = TO_FLOAT((bz - r + 1) << block_shift);
                    floatp sz1 = TO_FLOAT((bz + r) << block_shift);
                    floatp te = FMIN(FMIN(
                        exit_lanes(ox, dx, ix, FMAX(sx0, blo.x), FMIN(sx1, bhi.x)),
                        exit_lanes(oy, dy, iy, FMAX(sy0, blo.y), FMIN(sy1, bhi.y))),
                        exit_lanes(oz, dz, iz, FMAX(sz0, blo.z), FMIN(sz1, bhi.z)));
                    floatp tol = 1e-5f * (FABS(te) + 1.0f); // as raycast.cl
                    intp kn = IMAX(ceil_int((te - tol - t0) * inv_dt), k + 1);
                    skipped += jump ? kn - k : 0;
                    k = jump ? kn - 1 : k;
                }
                intp found = look & ~jump; // not empty: unchecked until the lane's next block
                lbx = found ? bx : lbx;
                lby = found ? by : lby;
                lbz = found ? bz : lbz;
            }
        }
        intp sample = owned & ~jump;
        if (any_lane(sample)) {
            floatp gx = CLAMP01(px - TO_FLOAT(cx));
            floatp gy = CLAMP01(py - TO_FLOAT(cy));
            floatp gz = CLAMP01(pz - TO_FLOAT(cz));
            floatp v000, v100, v010, v110, v001, v101, v011, v111;
#ifdef BYTE_CELLS
            uintp w0, w1;
#endif
            LANES {
                VOXEL_INDEX i000 = (VOXEL_INDEX)(cz[l] - gorg.z) * sz
                                   + (VOXEL_INDEX)(cy[l] - gorg.y) * sy
                                   + (VOXEL_INDEX)(cx[l] - gorg.x);
#ifdef BYTE_CELLS
                w0[l] = data[i000];
                w1[l] = data[i000 + sz];
#else
                v000[l] = data[i000]; v100[l] = data[i000 + 1];
                v010[l] = data[i000 + sy]; v110[l] = data[i000 + sy + 1];
                v001[l] = data[i000 + sz]; v101[l] = data[i000 + sz + 1];
                v011[l] = data[i000 + sz + sy]; v111[l] = data[i000 + sz + sy + 1];
#endif
            }
#ifdef BYTE_CELLS
            v000 = LEVELS(w0, 0); v100 = LEVELS(w0, 1); v010 = LEVELS(w0, 2); v110 = LEVELS(w0, 3);
            v001 = LEVELS(w1, 0); v101 = LEVELS(w1, 1); v011 = LEVELS(w1, 2); v111 = LEVELS(w1, 3);
#endif
            floatp v = TRILINEAR(v000, v100, v010, v110, v001, v101, v011, v111, gx, gy, gz);
            floatp u = CLAMP01(v) * lscale;
            intp j = IMIN(TO_INT(u), lut_n - 2);
            floatp w = u - TO_FLOAT(j);
            floatp ar, ag, ab, aa, br, bg, bb, ba; // the two table entries, per channel
            LANES {
                float4 ea = lut[j[l]], eb = lut[j[l] + 1];
                ar[l] = ea.x; ag[l] = ea.y; ab[l] = ea.z; aa[l] = ea.w;
                br[l] = eb.x; bg[l] = eb.y; bb[l] = eb.z; ba[l] = eb.w;
            }
            floatp cr = LERP(ar, br, w), cg = LERP(ag, bg, w);
            floatp cb = LERP(ab, bb, w), ca = LERP(aa, ba, w);
            floatp wgt = (1.0f - acc_a) * ca;
            acc_r = sample ? acc_r + wgt * cr : acc_r;
            acc_g = sample ? acc_g + wgt * cg : acc_g;
            acc_b = sample ? acc_b + wgt * cb : acc_b;
            acc_a = sample ? acc_a + wgt * 1.0f : acc_a;
            taken -= sample; // a set mask lane is -1
            live &= ~(sample & (acc_a >= ert));
        }
        k += 1;
        live &= k <= k_end;
    }
    LANES {
        if (xs[l] < width && ys[l] < height) {
            int pix = ys[l] * width + xs[l];
            image[pix] = (float4)(acc_r[l], acc_g[l], acc_b[l], acc_a[l]);
            counters[pix] = (uint2)((uint)taken[l], (uint)skipped[l]);
        }
    }
}

#endif
