/* The four per-frame phases, each its own launch so each gets its own profiling event:
 * primary (closest hit), shadow (any hit toward the light), ao (any hit within ao_radius),
 * shade (Phong + shadow + AO -> RGBA8). Requires traverse.cl before it. */

#ifdef COUNTERS
#define COUNTER_ARG , __global int2* counters
#define STORE_COUNTERS(i) counters[i] = (int2)(steps, tests)
#else
#define COUNTER_ARG
#define STORE_COUNTERS(i)
#endif

#define SHADOW_EPS 1e-4f

/* The primary ray through pixel (x, y), not normalized:
 * D = top_left + (x + 1/2) du + (y + 1/2) dv. */
ALWAYS_INLINE float3 pixel_ray(float4 top_left, float4 du, float4 dv, int x, int y) {
    return top_left.xyz + ((float)x + 0.5f) * du.xyz + ((float)y + 0.5f) * dv.xyz;
}

ALWAYS_INLINE float3 primary_dir(float4 top_left, float4 du, float4 dv, int x, int y) {
    return normalize3(pixel_ray(top_left, du, dv, x, y));
}

/* PCG hash (Jarzynski & Olano 2020): one uint32 -> one well-mixed uint32. */
ALWAYS_INLINE uint pcg_hash(uint v) {
    uint state = v * 747796405u + 2891336453u;
    uint word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

ALWAYS_INLINE float next_random(uint* state) {
    *state = pcg_hash(*state);
    return (float)(*state >> 8) * (1.0f / 16777216.0f);
}

/* Unit geometric normal of packed triangle k (the w of its three normals, bvh.packed_normals),
 * facing against the ray direction d. */
ALWAYS_INLINE float3 facing_normal(__global const float4* normals, int k, float3 d) {
    float3 n = (float3)(normals[3 * k].w, normals[3 * k + 1].w, normals[3 * k + 2].w);
    return DOT3(n, d) > 0.0f ? -n : n;
}

/* A cosine-weighted direction around unit n in the basis (b1, b2, n), from the next two
 * random numbers of *state. Unit up to rounding (an orthonormal basis), so not normalized
 * again: 2 % of the AO phase on the CPU runtimes. */
ALWAYS_INLINE float3 ao_direction(uint* state, float3 b1, float3 b2, float3 n) {
    float r1 = next_random(state), r2 = next_random(state);
    float r = SQRT(r1), phi = 6.28318530718f * r2;
    return b1 * (r * COS(phi)) + b2 * (r * SIN(phi)) + n * SQRT(FMAX(0.0f, 1.0f - r1));
}

/* Hit point offset along the facing normal so secondary rays do not re-hit their origin. */
ALWAYS_INLINE float3 offset_origin(float3 p, float3 n, float scene_scale) {
    return p + n * (SHADOW_EPS * scene_scale);
}

__kernel void primary(__global const float8* nodes, __global const float4* tris,
                      const float4 eye, const float4 top_left, const float4 du, const float4 dv,
                      const int width, const int height, __global float4* hits COUNTER_ARG) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= width || y >= height) return;
    int i = y * width + x;
    float3 d = primary_dir(top_left, du, dv, x, y);
    float t = INF_T, u = 0.0f, v = 0.0f;
    int steps = 0, tests = 0;
    int prim = trace(nodes, tris, eye.xyz, d, &t, &u, &v, 0, &steps, &tests);
    hits[i] = (float4)(t, u, v, as_float(prim));
    STORE_COUNTERS(i);
}

__kernel void shadow(__global const float8* nodes, __global const float4* tris,
                     __global const float4* normals,
                     const float4 eye, const float4 top_left, const float4 du, const float4 dv,
                     const int width, const int height, const float4 light, const float scene_scale,
                     __global const float4* hits, __global float* visibility COUNTER_ARG) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= width || y >= height) return;
    int i = y * width + x;
    int steps = 0, tests = 0;
    float4 h = hits[i];
    int prim = as_int(h.w);
    float vis = 1.0f;
    if (prim >= 0) {
        float3 d = primary_dir(top_left, du, dv, x, y);
        float3 n = facing_normal(normals, prim, d);
        float3 o = offset_origin(eye.xyz + h.x * d, n, scene_scale);
        /* the ray is the segment to the light, t in (0, 1 - eps), not normalized: no length
         * and no division lengthen the chain of dependent instructions before traversal
         * starts, which runs one work-item at a time on the CPU runtimes (7-12 % of the
         * phase there); the same segment, so the same occluders */
        float3 to_light = light.xyz - o;
        float t = 1.0f - SHADOW_EPS, u, v;
        if (DOT3(to_light, n) <= 0.0f) {
            vis = 0.0f;  /* the light is behind the surface */
        } else if (trace(nodes, tris, o, to_light, &t, &u, &v, 1, &steps, &tests) >= 0) {
            vis = 0.0f;
        }
    }
    visibility[i] = vis;
    STORE_COUNTERS(i);
}

/* The previous frame's AO sums around where world point p was in its image, by that
 * frame's camera (its eye, the direction through its top-left corner, its forward axis, its
 * pixel steps divided by their squared length): the mean of the 3x3 pixels there that saw the
 * same surface (their depth, the distance along the pixel's ray, within 2 % of p's), so
 * that each frame also spreads the history a pixel. (0, 0) where none did. */
#define KEPT_PIXEL(ox, oy) {                                                              \
        int xx = cx + (ox), yy = cy + (oy);                                               \
        if (xx >= 0 && yy >= 0 && xx < width && yy < height) {                            \
            int k = yy * width + xx;                                                      \
            float seen = depth[k];                                                        \
            if (FABS(seen - far) <= 0.02f * seen) { sum += history[k]; count += 1.0f; }   \
        }                                                                                 \
    }
ALWAYS_INLINE float2 kept_sums(float3 p, float4 eye, float4 top_left, float4 forward,
                               float4 du_scaled, float4 dv_scaled, int width, int height,
                               __global const float2* history, __global const float* depth) {
    float3 w = p - eye.xyz;
    float s = DOT3(w, forward.xyz);
    float2 sum = (float2)(0.0f, 0.0f);
    if (s <= 0.0f) return sum;
    float3 q = w / s - top_left.xyz;
    float px = DOT3(q, du_scaled.xyz), py = DOT3(q, dv_scaled.xyz);
    if (!(px >= 0.0f && py >= 0.0f && px < (float)width && py < (float)height)) return sum;
    int cx = (int)px, cy = (int)py;
    float far = length3(w), count = 0.0f;
    KEPT_PIXEL(-1, -1) KEPT_PIXEL(0, -1) KEPT_PIXEL(1, -1)
    KEPT_PIXEL(-1, 0) KEPT_PIXEL(0, 0) KEPT_PIXEL(1, 0)
    KEPT_PIXEL(-1, 1) KEPT_PIXEL(0, 1) KEPT_PIXEL(1, 1)
    return count > 0.0f ? sum / count : sum;
}

__kernel void ao(__global const float8* nodes, __global const float4* tris,
                 __global const float4* normals,
                 const float4 eye, const float4 top_left, const float4 du, const float4 dv,
                 const int width, const int height, const float ao_rays, const float ao_radius,
                 const float scene_scale, const uint seed,
                 __global const float4* hits, __global float* occlusion,
                 const float keep, const float4 last_eye, const float4 last_top_left,
                 const float4 last_forward, const float4 last_du, const float4 last_dv,
                 __global const float2* last_history, __global const float* last_depth,
                 __global float2* history, __global float* depth, const int filtered,
                 __global float* spread_open, __global float* spread_rays,
                 __global float* spread_depth, __global float4* spread_normal COUNTER_ARG) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= width || y >= height) return;
    int i = y * width + x;
    int steps = 0, tests = 0;
    float4 h = hits[i];
    int prim = as_int(h.w);
    float open = 1.0f;
    uint state = pcg_hash((uint)i ^ pcg_hash(seed));
    int rays = (int)ao_rays;
    float frac = ao_rays - (float)rays;
    /* a fractional count: one more ray in that share of the pixels (a continuous knob) */
    if (frac > 0.0f && next_random(&state) < frac) rays++;
    if (prim >= 0 && rays > 0) {
        float3 d = primary_dir(top_left, du, dv, x, y);
        float3 n = facing_normal(normals, prim, d);
        float3 o = offset_origin(eye.xyz + h.x * d, n, scene_scale);
        /* orthonormal basis around n (Duff et al. 2017) */
        float sign = n.z >= 0.0f ? 1.0f : -1.0f;
        float a = -1.0f / (sign + n.z);
        float b = n.x * n.y * a;
        float3 b1 = (float3)(1.0f + sign * n.x * n.x * a, sign * b, -sign * n.x);
        float3 b2 = (float3)(b, sign + n.y * n.y * a, -n.y);
        int blocked = 0;
        /* each ray's direction is built before the previous ray is traversed, so that its
         * set-up (random numbers, square roots, sin/cos) runs beside that traversal instead
         * of after it: 11-17 % of the phase on the CPU runtimes, the same rays. The pass
         * s = -1 builds only the first direction (inside the loop, not before it, so the PTX
         * counts see one direction per ray) */
        float3 dir = n, next = n;
        for (int s = -1; s < rays; ++s) {
            if (s + 1 < rays) next = ao_direction(&state, b1, b2, n);
            float t = ao_radius, u, v;
            if (s >= 0 && trace(nodes, tris, o, dir, &t, &u, &v, 1, &steps, &tests) >= 0)
                blocked++;
            dir = next;
        }
        open = 1.0f - (float)blocked / (float)rays;
    }
    /* AO kept over frames (keep > 0): this frame's open rays and rays, plus keep times the
     * sums where the previous frame saw the same surface, reprojected; AO depends on the
     * point and its normal only, so it carries from view to view */
    float2 sums = prim >= 0 && rays > 0 ? (float2)(open * (float)rays, (float)rays)
                                        : (float2)(0.0f, 0.0f);
    float seen = -1.0f;
    if (keep > 0.0f && prim >= 0) {
        float3 p = eye.xyz + h.x * primary_dir(top_left, du, dv, x, y);
        seen = h.x;
        sums += keep * kept_sums(p, last_eye, last_top_left, last_forward, last_du, last_dv,
                                 width, height, last_history, last_depth);
        open = sums.y > 0.0f ? sums.x / sums.y : 1.0f;
    }
    if (keep > 0.0f) {
        history[i] = sums;
        depth[i] = seen;
    }
    if (filtered) {
        /* what ao_filter spreads: the sums, the depth along the unnormalized primary
         * direction (-1: a miss) and the facing normal */
        int j = (y + AO_FILTER_REACH) * (width + 2 * AO_FILTER_REACH) + x + AO_FILTER_REACH;
        spread_open[j] = sums.x;
        spread_rays[j] = sums.y;
        float3 ray = pixel_ray(top_left, du, dv, x, y);
        spread_depth[j] = prim >= 0 ? h.x / SQRT(DOT3(ray, ray)) : -1.0f;
        if (prim >= 0)
            spread_normal[i] = (float4)(facing_normal(normals, prim, ray), 0.0f);
    }
    occlusion[i] = open;
    STORE_COUNTERS(i);
}

/* The AO term with few rays a pixel, made smooth without blurring it across edges: each
 * pixel's open rays and rays summed with those of its AO_FILTER_REACH neighbours on each side
 * whose points lie on its tangent plane, within a quarter of a pixel's footprint per pixel of
 * reach (an edge, a crease or a step in depth keeps its sides apart). A neighbour that traced
 * no ray (or missed the scene) adds nothing. The spread_* planes have a border of
 * AO_FILTER_REACH pixels without rays around the image, so every tap is a plain load,
 * contiguous across a SIMD group's pixels; depth is along the unnormalized primary direction
 * D (pixel_ray), so a neighbour's distance from the plane is linear in its depth:
 * n.(p_j - p) = t_j (n.D + dx n.du + dy n.dv) - t n.D. */
__kernel void ao_filter(const float4 top_left, const float4 du, const float4 dv,
                        const int width, const int height,
                        __global const float* spread_open, __global const float* spread_rays,
                        __global const float* spread_depth,
                        __global const float4* spread_normal, __global float* occlusion) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= width || y >= height) return;
    const int pitch = width + 2 * AO_FILTER_REACH;
    int j = (y + AO_FILTER_REACH) * pitch + x + AO_FILTER_REACH;
    float t = spread_depth[j];
    if (t < 0.0f) return;  /* a miss: shade paints the sky */
    float3 n = spread_normal[y * width + x].xyz;
    float3 ray = pixel_ray(top_left, du, dv, x, y);
    float a = DOT3(n, ray), b = DOT3(n, du), c = DOT3(n, dv);
    float footprint = 0.25f * t * SQRT(DOT3(ray, ray) * DOT3(du, du)), offset = t * a;
    float open = 0.0f, rays = 0.0f;
#pragma unroll
    for (int dy = -AO_FILTER_REACH; dy <= AO_FILTER_REACH; ++dy) {
#pragma unroll
        for (int dx = -AO_FILTER_REACH; dx <= AO_FILTER_REACH; ++dx) {
            int k = j + dy * pitch + dx;
            float off_plane = spread_depth[k] * (a + (float)dx * b + (float)dy * c) - offset;
            float reach = (float)max(abs(dx), abs(dy));  /* a constant once unrolled */
            float w = FABS(off_plane) <= footprint * reach ? 1.0f : 0.0f;
            open += w * spread_open[k];
            rays += w * spread_rays[k];
        }
    }
    occlusion[y * width + x] = rays > 0.0f ? open / rays : 1.0f;
}

__kernel void shade(__global const float4* tris, __global const float4* normals,
                    const float4 eye, const float4 top_left, const float4 du, const float4 dv,
                    const int width, const int height, const float4 light, const int flags,
                    __global const float4* hits, __global const float* visibility,
                    __global const float* occlusion, __global uchar4* image) {
    int x = get_global_id(0), y = get_global_id(1);
    if (x >= width || y >= height) return;
    int i = y * width + x;
    const int phong = flags & 1, shadows = flags & 2, use_ao = flags & 4;
    float4 h = hits[i];
    int prim = as_int(h.w);
    float3 d = primary_dir(top_left, du, dv, x, y);
    float3 color;
    if (prim < 0) {
        float s = 0.5f * (1.0f - d.y);
        color = (float3)(0.55f, 0.65f, 0.8f) * (1.0f - s) + (float3)(0.9f, 0.9f, 0.92f) * s;
    } else {
        float3 n = normalize3(normals[3 * prim].xyz * (1.0f - h.y - h.z)
                             + normals[3 * prim + 1].xyz * h.y + normals[3 * prim + 2].xyz * h.z);
        if (DOT3(n, d) > 0.0f) n = -n;
        float3 p = eye.xyz + h.x * d;
        float ao_term = use_ao ? occlusion[i] : 1.0f;
        float vis = shadows ? visibility[i] : 1.0f;
        float3 albedo = (float3)(0.8f, 0.78f, 0.72f);
        if (phong) {
            float3 l = normalize3(light.xyz - p);
            float ndl = DOT3(n, l);
            float diffuse = FMAX(ndl, 0.0f);
            float3 r = 2.0f * ndl * n - l;
            float spec = diffuse > 0.0f ? pow32(FMAX(-DOT3(r, d), 0.0f)) : 0.0f;
            color = albedo * (0.25f * ao_term + 0.75f * diffuse * vis) + 0.3f * spec * vis;
        } else {
            color = albedo * ao_term * (0.3f + 0.7f * FABS(DOT3(n, d)));
        }
    }
    color = FMIN(FMAX(color, (float3)(0.0f)), (float3)(1.0f));
    image[i] = (uchar4)((uchar)(gamma_encode(color.x) * 255.0f + 0.5f),
                        (uchar)(gamma_encode(color.y) * 255.0f + 0.5f),
                        (uchar)(gamma_encode(color.z) * 255.0f + 0.5f), (uchar)255);
}
