/* The primary phase in packets: one work-item traces the closest hits of a 4x2 block of pixels,
 * one ray per float8 lane, through the 8-wide BVH together (Wald et al. 2001's coherent ray
 * packets on a wide tree). Requires traverse.cl and tracer.cl before it; chosen per device by
 * timing it against `primary` (raytracer/device/launches.py), so a GPU, whose work-items run
 * in lanes already, keeps `primary`.
 *
 * Where each work-item runs as scalar code (PoCL; Intel's CPU runtime for the traversal
 * kernels), a ray's own traversal pays about sixteen unpredictable branches per node step
 * (eight leaf tests, eight pushes). Primary rays from neighbouring pixels share most of their
 * path, so here one node step serves eight rays: each child box is tested against the eight
 * rays at once (each lane takes its near and far planes by its own direction signs), a leaf is
 * tested if any lane hits its box (every triangle against the eight rays, one float8
 * Möller–Trumbore), an inner child is pushed if any lane hits it, with the nearest entry
 * distance of those lanes, and the nearest child just pushed is taken next, as `trace` does
 * for one ray. A popped node is dropped when it starts beyond every lane's closest hit.
 * The triangle test is the shadow packet's (`packet_triangle`) with the eye in every lane.
 * Per lane this is the same closest hit as `primary` (same ray, same triangle test, ties to
 * the lowest index); the order in which leaves are met differs, so equal-distance ties may
 * resolve to the other triangle. Scratch A/B, one compute unit, 1280x720, quiet: 2.7x
 * (dragon) and 2.5x (sibenik) `primary`'s speed on PoCL 3.1, 2.6x / 2.3x on Intel's runtime.
 * COUNTERS: each pixel gets its packet's node steps and triangle tests (what its packet paid;
 * a leaf's triangles are tested one after another here, one at a time in float4 lanes in
 * `trace`, so the packet's cost follows triangles). */

#define PACKET_COLS 4 /* raytracer.phases.RAY_PACKET */
#define PACKET_ROWS 2

ALWAYS_INLINE float hmin8(float8 v) {
    float4 a = FMIN(v.lo, v.hi);
    float2 b = FMIN(a.lo, a.hi);
    return FMIN(b.x, b.y);
}

ALWAYS_INLINE float hmax8(float8 v) {
    float4 a = FMAX(v.lo, v.hi);
    float2 b = FMAX(a.lo, a.hi);
    return FMAX(b.x, b.y);
}

ALWAYS_INLINE float8 safe_inverse8(float8 d) {
    float8 e = d >= (float8)(0.0f) ? (float8)(EPS_DIR) : (float8)(-EPS_DIR);
    return 1.0f / (FABS(d) < (float8)(EPS_DIR) ? e : d);
}

/* Child C's box (planes lox .. hiz of the node, loaded by the caller) against the packet's
 * eight rays (inverse directions ix, iy, iz, origins times them oix, oiy, oiz, direction
 * signs neg_x, neg_y, neg_z): `hit`, the lanes whose ray enters it no later than it leaves it
 * within [0, tmax] (`trace`'s slab test, each lane with its own near and far planes; a lane
 * with tmax < 0 never hits), and `tn`, their entry distances. Shared by the packet kernels. */
#define PACKET_BOX(C, tmax, tn, hit)                                                         \
    float8 tn = FMAX(FMAX((neg_x ? (float8)(hix.C) : (float8)(lox.C)) * ix - oix,             \
                          (neg_y ? (float8)(hiy.C) : (float8)(loy.C)) * iy - oiy),            \
                     FMAX((neg_z ? (float8)(hiz.C) : (float8)(loz.C)) * iz - oiz,             \
                          (float8)(0.0f)));                                                  \
    int8 hit = tn <= FMIN(FMIN((neg_x ? (float8)(lox.C) : (float8)(hix.C)) * ix - oix,        \
                               (neg_y ? (float8)(loy.C) : (float8)(hiy.C)) * iy - oiy),       \
                          FMIN((neg_z ? (float8)(loz.C) : (float8)(hiz.C)) * iz - oiz, tmax));

/* The packet's ray set-up for PACKET_BOX from origins (ox, oy, oz) and directions (dx, dy,
 * dz): declares ix .. neg_z. */
#define PACKET_RAYS(ox, oy, oz)                                                              \
    float8 ix = safe_inverse8(dx), iy = safe_inverse8(dy), iz = safe_inverse8(dz);           \
    float8 oix = (ox) * ix, oiy = (oy) * iy, oiz = (oz) * iz;                                 \
    int8 neg_x = ix < (float8)(0.0f), neg_y = iy < (float8)(0.0f), neg_z = iz < (float8)(0.0f);

/* Möller–Trumbore of triangle k against the rays of the lanes in `active` (origins o,
 * directions d): the lanes that hit it in (0, tmax), with their t, u and v. Shared by the
 * packet kernels (the primary packet's origins are the eye in every lane: the same time as a
 * test with s and q scalar, PoCL 3.1 and Intel's runtime, one compute unit, 1280x720). */
ALWAYS_INLINE int8 packet_triangle(__global const float4* tris, int k, float8 ox, float8 oy,
                                   float8 oz, float8 dx, float8 dy, float8 dz, int8 active,
                                   float8 tmax, float8* t, float8* u, float8* v) {
    /* slot k's nine coordinates, lane k % 4 of its leaf block's rows (bvh.leaf_blocks) */
    __global const float* b = (__global const float*)(tris + 9 * (k >> 2)) + (k & 3);
    float3 a = (float3)(b[0], b[4], b[8]), e1 = (float3)(b[12], b[16], b[20]),
           e2 = (float3)(b[24], b[28], b[32]);
    float8 px = dy * e2.z - dz * e2.y, py = dz * e2.x - dx * e2.z, pz = dx * e2.y - dy * e2.x;
    float8 det = e1.x * px + e1.y * py + e1.z * pz;
    float8 inv = 1.0f / det;
    float8 sx = ox - a.x, sy = oy - a.y, sz = oz - a.z;
    *u = (sx * px + sy * py + sz * pz) * inv;
    float8 qx = sy * e1.z - sz * e1.y, qy = sz * e1.x - sx * e1.z, qz = sx * e1.y - sy * e1.x;
    *v = (dx * qx + dy * qy + dz * qz) * inv;
    *t = (e2.x * qx + e2.y * qy + e2.z * qz) * inv;
    return active & (FABS(det) >= (float8)(1e-12f)) & (*u >= (float8)(0.0f))
           & (*u <= (float8)(1.0f)) & (*v >= (float8)(0.0f)) & (*u + *v <= (float8)(1.0f))
           & (*t > (float8)(0.0f)) & (*t < tmax);
}

/* Child C of the node: its box against the eight rays; a hit leaf is tested (a lane's closest
 * hit moves to a triangle it hits nearer), a hit inner child pushed. */
#define PACKET_CHILD(C)                                                                      \
    {                                                                                        \
        PACKET_BOX(C, best, tn, hit)                                                         \
        if (ANY8(hit)) {                                                                     \
            if (cnt.C > 0) {                                                                 \
                COUNT(tests += cnt.C);                                                       \
                for (int k = idx.C; k < idx.C + cnt.C; ++k) {                                \
                    float8 t, u, v;                                                          \
                    int8 ok = packet_triangle(tris, k, ex, ey, ez, dx, dy, dz, hit, best,    \
                                              &t, &u, &v);                                   \
                    best = ok ? t : best;                                                    \
                    bu = ok ? u : bu;                                                        \
                    bv = ok ? v : bv;                                                        \
                    prim = ok ? (int8)(k) : prim;                                            \
                }                                                                            \
            } else {                                                                         \
                stack[sp] = idx.C;                                                           \
                stack_t[sp++] = hmin8(hit ? tn : (float8)(INF_T));                           \
            }                                                                                \
        }                                                                                    \
    }

/* Lane L's pixel (x0 + L % 4, y0 + L / 4): its hit as `primary` writes it. */
#define STORE_LANE(L, S)                                                                     \
    if (x0 + (L & 3) < width && y0 + (L >> 2) < height) {                                    \
        int i = (y0 + (L >> 2)) * width + x0 + (L & 3);                                      \
        hits[i] = (float4)(prim.S >= 0 ? best.S : INF_T, bu.S, bv.S, as_float(prim.S));      \
        STORE_COUNTERS(i);                                                                   \
    }

__kernel void primary_packet(__global const float8* nodes, __global const float4* tris,
                             const float4 eye, const float4 top_left, const float4 du,
                             const float4 dv, const int width, const int height,
                             __global float4* hits COUNTER_ARG) {
    int x0 = get_global_id(0) * PACKET_COLS, y0 = get_global_id(1) * PACKET_ROWS;
    if (x0 >= width || y0 >= height) return;
    const float8 lane_x = (float8)(0.0f, 1.0f, 2.0f, 3.0f, 0.0f, 1.0f, 2.0f, 3.0f);
    const float8 lane_y = (float8)(0.0f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f);
    /* primary_dir's arithmetic, lane by lane */
    float8 fx = ((float8)((float)x0) + lane_x) + 0.5f, fy = ((float8)((float)y0) + lane_y) + 0.5f;
    float8 dx = top_left.x + fx * du.x + fy * dv.x;
    float8 dy = top_left.y + fx * du.y + fy * dv.y;
    float8 dz = top_left.z + fx * du.z + fy * dv.z;
    float8 sq = dx * dx + dy * dy + dz * dz;
    float8 len = (float8)(SQRT(sq.s0), SQRT(sq.s1), SQRT(sq.s2), SQRT(sq.s3), SQRT(sq.s4),
                          SQRT(sq.s5), SQRT(sq.s6), SQRT(sq.s7));
    dx /= len;
    dy /= len;
    dz /= len;
    /* lanes beyond the image start with a closest hit at t = -1: no box or triangle test
     * passes for them */
    int8 inside = ((float8)((float)x0) + lane_x < (float8)((float)width))
                  & ((float8)((float)y0) + lane_y < (float8)((float)height));
    float8 best = inside ? (float8)(INF_T) : (float8)(-1.0f);
    float8 bu = (float8)(0.0f), bv = (float8)(0.0f);
    int8 prim = (int8)(-1);
    float8 ex = (float8)(eye.x), ey = (float8)(eye.y), ez = (float8)(eye.z);
    PACKET_RAYS(ex, ey, ez)
    int steps = 0, tests = 0;
    int stack[STACK_SIZE];
    float stack_t[STACK_SIZE];
    int sp = 0, node = 0;
    for (;;) {
        if (node < 0) {
            if (sp == 0) break;
            --sp;
            if (stack_t[sp] > hmax8(best)) continue;
            node = stack[sp];
        }
        COUNT(steps++);
        __global const float8* n = nodes + 8 * node;
        float8 lox = n[0], hix = n[1], loy = n[2], hiy = n[3], loz = n[4], hiz = n[5];
        int8 idx = as_int8(n[6]), cnt = as_int8(n[7]);
        int pushed = sp;
        PACKET_CHILD(s0) PACKET_CHILD(s1) PACKET_CHILD(s2) PACKET_CHILD(s3)
        PACKET_CHILD(s4) PACKET_CHILD(s5) PACKET_CHILD(s6) PACKET_CHILD(s7)
        node = -1;
        if (sp == pushed) continue;
        node = take_nearest(stack, stack_t, pushed, &sp); /* as trace() */
    }
    STORE_LANE(0, s0) STORE_LANE(1, s1) STORE_LANE(2, s2) STORE_LANE(3, s3)
    STORE_LANE(4, s4) STORE_LANE(5, s5) STORE_LANE(6, s6) STORE_LANE(7, s7)
}
