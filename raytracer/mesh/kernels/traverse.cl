/* BVH traversal shared by every tracer kernel (requires rtmath.cl before it). The 8-wide node
 * and the triangle byte layouts are documented in raytracer/bvh/layout.py; raytracer/traversal.py is
 * the step-for-step CPU twin of this file (same tests, same order, same counters).
 *
 * One ray per work-item. A step loads one node and tests the eight child boxes at once: each
 * axis' near and far planes are picked by the sign of the ray direction (an array offset, not
 * a min/max), so a slab is one float8 multiply-add per plane. Hit leaf children are tested
 * in slot order, skipping a leaf whose box starts beyond the closest hit so far; a leaf's
 * (up to four) triangles are tested at once, one per float4 lane, and its nearest hit kept
 * (each work-item runs as scalar code on the CPU runtimes here, so these lanes and the box
 * test's are the only SIMD a ray gets). The hit inner children (those still starting before
 * the closest hit) are pushed with their entry distances, last slot first; an any-hit ray
 * (shadow, AO) then pops the top (slot order; where AVX-512's compress is at hand it takes
 * that child straight from the node and pushes only the others: descend_any_hit), a
 * closest-hit ray takes the nearest of those just pushed (ties: the first found scanning up
 * from the lowest pushed; the top moves into its place), so a single hit child costs one
 * push and pop and no sort. A popped node that starts beyond the closest hit is dropped.
 * Any-hit rays stop at the first leaf with a hit.
 * Eight children at a time instead of four (same leaves, the collapse opens two more levels)
 * made every ray kind 7-38 % faster on Intel's CPU runtime. */

#define STACK_SIZE 96 /* bvh.KERNEL_STACK: the build checks that no ray can need more */
#ifdef COMPRESS8
#define STACK_SLACK 8 /* descend_any_hit stores eight ints at the top */
#else
#define STACK_SLACK 0
#endif
#define EPS_DIR 1e-12f
#define INF_T 1e30f   /* finite "no hit" sentinel: stays valid under -cl-fast-relaxed-math */

#ifdef COUNTERS
#define COUNT(x) (x)
#else
#define COUNT(x)
#endif

ALWAYS_INLINE float safe_inverse(float d) {
    if (FABS(d) < EPS_DIR) d = d >= 0.0f ? EPS_DIR : -EPS_DIR;
    return 1.0f / d;
}

/* Möller–Trumbore on the (up to) four triangles first .. first + c - 1 of one leaf at once,
 * one triangle per float4 lane (lanes past c hold a copy of the first and are masked off):
 * the leaf's block (bvh.leaf_blocks, first a multiple of 4) is already structure-of-arrays,
 * nine float4 loads; every lane computes the whole test and the miss conditions are one mask,
 * so a leaf costs one branch-free vector test instead of c scalar tests with an unpredictable
 * exit each. Returns the slot index of the nearest hit closer than best (ties: the lowest
 * lane, as testing them in order would), its t and barycentrics; -1 if none. */
ALWAYS_INLINE int intersect_leaf(__global const float4* tris, int first, int c, float3 o,
                                 float3 d, float best, float* t_out, float* u_out,
                                 float* v_out) {
    __global const float4* b = tris + 9 * (first >> 2);
    float4 e1x = b[3], e1y = b[4], e1z = b[5], e2x = b[6], e2y = b[7], e2z = b[8];
    float4 sx = o.x - b[0], sy = o.y - b[1], sz = o.z - b[2];
    float4 px = d.y * e2z - d.z * e2y, py = d.z * e2x - d.x * e2z, pz = d.x * e2y - d.y * e2x;
    float4 det = e1x * px + e1y * py + e1z * pz;
    float4 inv = 1.0f / det;
    float4 u = (sx * px + sy * py + sz * pz) * inv;
    float4 qx = sy * e1z - sz * e1y, qy = sz * e1x - sx * e1z, qz = sx * e1y - sy * e1x;
    float4 v = (d.x * qx + d.y * qy + d.z * qz) * inv;
    float4 t = (e2x * qx + e2y * qy + e2z * qz) * inv;
    int4 ok = (FABS(det) >= (float4)(1e-12f)) & (u >= (float4)(0.0f)) & (u <= (float4)(1.0f))
              & (v >= (float4)(0.0f)) & (u + v <= (float4)(1.0f)) & (t > (float4)(0.0f))
              & (t < (float4)(best)) & ((int4)(0, 1, 2, 3) < (int4)(c));
    if ((ok.x | ok.y | ok.z | ok.w) == 0) return -1;
    t = ok ? t : (float4)(INF_T);
    int lane = 0;
    float bt = t.x, bu = u.x, bv = v.x;
    if (t.y < bt) { lane = 1; bt = t.y; bu = u.y; bv = v.y; }
    if (t.z < bt) { lane = 2; bt = t.z; bu = u.z; bv = v.z; }
    if (t.w < bt) { lane = 3; bt = t.w; bu = u.w; bv = v.w; }
    *t_out = bt;
    *u_out = bu;
    *v_out = bv;
    return first + lane;
}

/* Leaf child C (a component s0..s7, bit BIT of leaf_bits): test its triangles if its box was
 * hit and starts no farther than the closest hit so far (an any-hit ray's best stays its tmax,
 * which the box test already bounds: no second comparison). */
#define LEAF(C, BIT)                                                            \
    if (LANE(leaf, leaf_bits, C, BIT) && (any_hit || tn.C <= best)) {           \
        COUNT((*tests)++);                                                      \
        float t, u, v;                                                          \
        int k = intersect_leaf(tris, idx.C, cnt.C, o, d, best, &t, &u, &v);     \
        if (k >= 0) {                                                           \
            best = t;                                                           \
            prim = k;                                                           \
            *u_out = u;                                                         \
            *v_out = v;                                                         \
            if (any_hit) {                                                      \
                *t_io = best;                                                   \
                return prim;                                                    \
            }                                                                   \
        }                                                                       \
    }

/* Push inner child C (in: the hit inner children; bit BIT of in_bits) with its entry
 * distance. */
#define PUSH(C, BIT)                 \
    if (LANE(in, in_bits, C, BIT)) { \
        stack[sp] = idx.C;           \
        stack_t[sp++] = tn.C;        \
    }

#ifdef COMPRESS8
/* An any-hit ray's next node without a round trip through the stack: the hit inner child in
 * the lowest slot, which the pushes would leave on top; the others pushed in one store, the
 * highest slot first as the pushes order them (so the same nodes in the same order). */
ALWAYS_INLINE int descend_any_hit(__global const float8* n, int8 in, int8 idx, int* stack,
                                  int* sp) {
    int low = __builtin_ctz(LANE_BITS(in));
    int rest = LANE_BITS(in.s76543210) & ~(128 >> low); /* lane k: slot 7 - k */
    vstore8(COMPRESS8(idx.s76543210, rest), 0, stack + *sp);
    *sp += __builtin_popcount(rest);
    return ((__global const int*)(n + 6))[low];
}
#endif

/* The nearest of the entries pushed since `pushed` (by stack_t), taken off the stack (the top
 * moves into its place): the node a closest-hit traversal visits next. */
ALWAYS_INLINE int take_nearest(int* stack, float* stack_t, int pushed, int* sp) {
    int nearest = *sp - 1;
    for (int j = pushed; j < *sp - 1; ++j)
        if (stack_t[j] < stack_t[nearest]) nearest = j;
    int node = stack[nearest];
    --*sp;
    stack[nearest] = stack[*sp];
    stack_t[nearest] = stack_t[*sp];
    return node;
}

/* Closest hit (or any hit when any_hit) below tmax. Returns the packed triangle index or -1;
 * *t_io holds tmax on entry and the hit distance on exit. steps/tests count work (COUNTERS):
 * nodes visited and leaves tested. */
ALWAYS_INLINE int trace(__global const float8* nodes, __global const float4* tris, float3 o,
                        float3 d, float* t_io, float* u_out, float* v_out, const int any_hit,
                        int* steps, int* tests) {
    float3 inv = (float3)(safe_inverse(d.x), safe_inverse(d.y), safe_inverse(d.z));
    float3 oi = o * inv;
    /* float8 offsets of each axis' near and far planes within a node */
    const int xn = inv.x < 0.0f ? 1 : 0, yn = inv.y < 0.0f ? 3 : 2, zn = inv.z < 0.0f ? 5 : 4;
    const int xf = 1 - xn, yf = 5 - yn, zf = 9 - zn;
    int stack[STACK_SIZE + STACK_SLACK];
    float stack_t[STACK_SIZE];
    int sp = 0;
    int node = 0;
    float best = *t_io;
    int prim = -1;
    for (;;) {
        if (node < 0) { /* pop; closest-hit rays drop nodes that start beyond the best hit */
            if (sp == 0) break;
            --sp;
            if (!any_hit && stack_t[sp] > best) continue;
            node = stack[sp];
        }
        COUNT((*steps)++);
        __global const float8* n = nodes + 8 * node;
        float8 tn = FMAX(FMAX(n[xn] * inv.x - oi.x, n[yn] * inv.y - oi.y),
                         FMAX(n[zn] * inv.z - oi.z, (float8)(0.0f)));
        float8 tf = FMIN(FMIN(n[xf] * inv.x - oi.x, n[yf] * inv.y - oi.y),
                         FMIN(n[zf] * inv.z - oi.z, (float8)(best)));
        int8 hit = tn <= tf;
        int8 idx = as_int8(n[6]), cnt = as_int8(n[7]);
        int8 leaf = hit & (cnt > 0);
        if (ANY8(leaf)) {
            int leaf_bits = LANE_BITS(leaf);
            LEAF(s0, 1) LEAF(s1, 2) LEAF(s2, 4) LEAF(s3, 8)
            LEAF(s4, 16) LEAF(s5, 32) LEAF(s6, 64) LEAF(s7, 128)
        }
        int8 in = hit & (cnt == 0);
        if (!any_hit) in &= tn <= (float8)(best);
        node = -1;
        if (!ANY8(in)) continue;
#ifdef COMPRESS8
        if (any_hit) {
            node = descend_any_hit(n, in, idx, stack, &sp);
            continue;
        }
#endif
        int pushed = sp, in_bits = LANE_BITS(in);
        PUSH(s7, 128) PUSH(s6, 64) PUSH(s5, 32) PUSH(s4, 16)
        PUSH(s3, 8) PUSH(s2, 4) PUSH(s1, 2) PUSH(s0, 1)
        if (any_hit) continue;
        node = take_nearest(stack, stack_t, pushed, &sp);
    }
    *t_io = best;
    return prim;
}
