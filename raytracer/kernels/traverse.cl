/* BVH traversal shared by every tracer kernel (requires rtmath.cl before it). Node and
 * triangle byte layouts are documented in raytracer/bvh.py; raytracer/traversal.py is the
 * step-for-step CPU twin of this file. */

#define STACK_SIZE 64
#define EPS_DIR 1e-12f
#define INF_T 1e30f  /* finite "no hit" sentinel: stays valid under -cl-fast-relaxed-math */

#ifdef COUNTERS
#define COUNT(x) (x)
#else
#define COUNT(x)
#endif

ALWAYS_INLINE float safe_inverse(float d) {
    if (FABS(d) < EPS_DIR) d = d >= 0.0f ? EPS_DIR : -EPS_DIR;
    return 1.0f / d;
}

/* oi = o * inv, so each plane costs one multiply-add: t = lo * inv - o * inv */
ALWAYS_INLINE float slab(float4 lo, float4 hi, float3 oi, float3 inv, float tmax) {
    float3 t0 = lo.xyz * inv - oi;
    float3 t1 = hi.xyz * inv - oi;
    float3 tmin3 = FMIN(t0, t1), tmax3 = FMAX(t0, t1);
    float tnear = FMAX(FMAX(tmin3.x, tmin3.y), FMAX(tmin3.z, 0.0f));
    float tfar = FMIN(FMIN(tmax3.x, tmax3.y), FMIN(tmax3.z, tmax));
    return tnear <= tfar ? tnear : INF_T;
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

/* Closest hit (or any hit when any_hit) below tmax. Returns the packed triangle index or -1;
 * *t_io holds tmax on entry and the hit distance on exit. steps/tests count work (COUNTERS). */
ALWAYS_INLINE int trace(__global const float4* nodes, __global const float4* tris, float3 o, float3 d,
                 float* t_io, float* u_out, float* v_out, const int any_hit,
                 int* steps, int* tests) {
    float3 inv = (float3)(safe_inverse(d.x), safe_inverse(d.y), safe_inverse(d.z));
    float3 oi = o * inv;
    int stack[STACK_SIZE];
    int sp = 0;
    int node = 0;
    float best = *t_io;
    int prim = -1;
    while (node >= 0) {
        COUNT((*steps)++);
        float4 a0 = nodes[4 * node], a1 = nodes[4 * node + 1];
        float4 b0 = nodes[4 * node + 2], b1 = nodes[4 * node + 3];
        float t0 = slab(a0, a1, oi, inv, best);
        float t1 = slab(b0, b1, oi, inv, best);
        int next0 = -1, next1 = -1;
        if (t0 != INF_T) {
            int first = as_int(a0.w), count = as_int(a1.w);
            if (count > 0) {
                for (int k = first; k < first + count; ++k) {
                    COUNT((*tests)++);
                    float u, v;
                    float t = intersect_triangle(tris, k, o, d, &u, &v);
                    if (t < best) {
                        best = t; prim = k; *u_out = u; *v_out = v;
                        if (any_hit) { *t_io = best; return prim; }
                    }
                }
            } else {
                next0 = first;
            }
        }
        if (t1 != INF_T) {
            int first = as_int(b0.w), count = as_int(b1.w);
            if (count > 0) {
                for (int k = first; k < first + count; ++k) {
                    COUNT((*tests)++);
                    float u, v;
                    float t = intersect_triangle(tris, k, o, d, &u, &v);
                    if (t < best) {
                        best = t; prim = k; *u_out = u; *v_out = v;
                        if (any_hit) { *t_io = best; return prim; }
                    }
                }
            } else {
                next1 = first;
            }
        }
        if (next0 >= 0 && next1 >= 0) {
            if (t1 < t0) { int tmp = next0; next0 = next1; next1 = tmp; }
            stack[sp++] = next1;
            node = next0;
        } else if (next0 >= 0) {
            node = next0;
        } else if (next1 >= 0) {
            node = next1;
        } else if (sp > 0) {
            node = stack[--sp];
        } else {
            node = -1;
        }
    }
    *t_io = best;
    return prim;
}
