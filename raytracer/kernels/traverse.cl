/* BVH traversal shared by every tracer kernel (requires rtmath.cl before it). The 4-wide node
 * and the triangle byte layouts are documented in raytracer/bvh.py; raytracer/traversal.py is
 * the step-for-step CPU twin of this file (same tests, same order, same counters).
 *
 * One ray per work-item. A step loads one node and tests the four child boxes at once: each
 * axis' near and far planes are picked by the sign of the ray direction (an array offset, not
 * a min/max), so a slab is one float4 multiply-add per plane. Hit leaf children are tested
 * in slot order, skipping a leaf whose box starts beyond the closest hit so far. Of the hit
 * inner children (those still starting before the closest hit), a single one is simply the
 * next node (the common case: no sort, no stack); several are, for closest-hit rays, sorted by
 * entry distance (insertion into four registers): the nearest is next and the others are
 * pushed far to near with their distances, so a popped node that starts beyond the closest
 * hit is dropped. Any-hit rays (shadow, AO) push several hit inner children unsorted (popped
 * in slot order) and stop at the first triangle hit. */

#define STACK_SIZE 64 /* bvh.KERNEL_STACK: the build checks that no ray can need more */
#define EPS_DIR 1e-12f
#define INF_T 1e30f   /* finite "no hit" sentinel: stays valid under -cl-fast-relaxed-math */
#define EMPTY_T 2e30f /* an empty sort slot: beyond any entry distance */

#ifdef COUNTERS
#define COUNT(x) (x)
#else
#define COUNT(x)
#endif

ALWAYS_INLINE float safe_inverse(float d) {
    if (FABS(d) < EPS_DIR) d = d >= 0.0f ? EPS_DIR : -EPS_DIR;
    return 1.0f / d;
}

/* Möller–Trumbore on packed triangle k; returns t (INF_T on a miss) and barycentrics. */
ALWAYS_INLINE float intersect_triangle(__global const float4* tris, int k, float3 o, float3 d,
                                       float* u_out, float* v_out) {
    float3 v0 = tris[3 * k].xyz, e1 = tris[3 * k + 1].xyz, e2 = tris[3 * k + 2].xyz;
    float3 p = CROSS3(d, e2);
    float det = DOT3(e1, p);
    if (FABS(det) < 1e-12f) return INF_T;
    float inv = 1.0f / det;
    float3 s = o - v0;
    float u = DOT3(s, p) * inv;
    if (u < 0.0f || u > 1.0f) return INF_T;
    float3 q = CROSS3(s, e1);
    float v = DOT3(d, q) * inv;
    if (v < 0.0f || u + v > 1.0f) return INF_T;
    float t = DOT3(e2, q) * inv;
    if (t <= 0.0f) return INF_T;
    *u_out = u;
    *v_out = v;
    return t;
}

/* Leaf child C (a component x/y/z/w): test its triangles if its box was hit and starts no
 * farther than the closest hit so far. */
#define LEAF(C)                                                                 \
    if (hit.C && cnt.C > 0 && tn.C <= best) {                                   \
        for (int k = idx.C; k < idx.C + cnt.C; ++k) {                           \
            COUNT((*tests)++);                                                  \
            float u, v;                                                         \
            float t = intersect_triangle(tris, k, o, d, &u, &v);                \
            if (t < best) {                                                     \
                best = t;                                                       \
                prim = k;                                                       \
                *u_out = u;                                                     \
                *v_out = v;                                                     \
                if (any_hit) {                                                  \
                    *t_io = best;                                               \
                    return prim;                                                \
                }                                                               \
            }                                                                   \
        }                                                                       \
    }

/* Any-hit: push inner child C (in: the hit inner children). */
#define PUSH_ANY(C) \
    if (in.C) stack[sp++] = idx.C;

#define SWAP_IF_NEARER(J)                                 \
    if (cd < d##J) {                                      \
        int ti = n##J; float td = d##J;                   \
        n##J = ci; d##J = cd; ci = ti; cd = td;           \
    }

/* Closest hit: insert inner child C into the sorted n0..n3 / d0..d3 (ties keep slot order). */
#define SORT_IN(C)                                                              \
    if (in.C) {                                                                 \
        int ci = idx.C;                                                         \
        float cd = tn.C;                                                        \
        SWAP_IF_NEARER(0) SWAP_IF_NEARER(1) SWAP_IF_NEARER(2) SWAP_IF_NEARER(3) \
    }

/* Closest hit (or any hit when any_hit) below tmax. Returns the packed triangle index or -1;
 * *t_io holds tmax on entry and the hit distance on exit. steps/tests count work (COUNTERS):
 * nodes visited and triangles tested. */
ALWAYS_INLINE int trace(__global const float4* nodes, __global const float4* tris, float3 o,
                        float3 d, float* t_io, float* u_out, float* v_out, const int any_hit,
                        int* steps, int* tests) {
    float3 inv = (float3)(safe_inverse(d.x), safe_inverse(d.y), safe_inverse(d.z));
    float3 oi = o * inv;
    /* float4 offsets of each axis' near and far planes within a node */
    const int xn = inv.x < 0.0f ? 1 : 0, yn = inv.y < 0.0f ? 3 : 2, zn = inv.z < 0.0f ? 5 : 4;
    const int xf = 1 - xn, yf = 5 - yn, zf = 9 - zn;
    int stack[STACK_SIZE];
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
        __global const float4* n = nodes + 8 * node;
        float4 tn = FMAX(FMAX(n[xn] * inv.x - oi.x, n[yn] * inv.y - oi.y),
                         FMAX(n[zn] * inv.z - oi.z, (float4)(0.0f)));
        float4 tf = FMIN(FMIN(n[xf] * inv.x - oi.x, n[yf] * inv.y - oi.y),
                         FMIN(n[zf] * inv.z - oi.z, (float4)(best)));
        int4 hit = tn <= tf;
        int4 idx = as_int4(n[6]), cnt = as_int4(n[7]);
        int4 leaf = hit & (cnt > 0);
        if ((leaf.x | leaf.y | leaf.z | leaf.w) != 0) {
            LEAF(x) LEAF(y) LEAF(z) LEAF(w)
        }
        int4 in = hit & (cnt == 0) & (tn <= (float4)(best));
        int m = (in.x & 1) | (in.y & 2) | (in.z & 4) | (in.w & 8);
        if (m == 0) {
            node = -1;
        } else if ((m & (m - 1)) == 0) { /* one inner child: no sort, no push */
            node = m == 1 ? idx.x : m == 2 ? idx.y : m == 4 ? idx.z : idx.w;
        } else if (any_hit) {
            node = -1;
            PUSH_ANY(w) PUSH_ANY(z) PUSH_ANY(y) PUSH_ANY(x) /* popped in slot order */
        } else {
            int n0 = -1, n1 = -1, n2 = -1, n3 = -1;
            float d0 = EMPTY_T, d1 = EMPTY_T, d2 = EMPTY_T, d3 = EMPTY_T;
            SORT_IN(x) SORT_IN(y) SORT_IN(z) SORT_IN(w)
            if (n3 >= 0) { stack[sp] = n3; stack_t[sp++] = d3; }
            if (n2 >= 0) { stack[sp] = n2; stack_t[sp++] = d2; }
            if (n1 >= 0) { stack[sp] = n1; stack_t[sp++] = d1; }
            node = n0;
        }
    }
    *t_io = best;
    return prim;
}
