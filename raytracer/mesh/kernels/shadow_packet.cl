/* The shadow phase in packets: one work-item traces the shadow rays of a 4x2 block of pixels,
 * one ray per float8 lane, through the shadow BVH together. Requires primary_packet.cl before
 * it (the packet's size and helpers); chosen per device by timing it against `shadow`
 * (raytracer/device/launches.py), as the primary packets are.
 *
 * Each lane is `shadow`'s ray: from its pixel's offset hit point toward the light, the segment
 * t in (0, 1 - eps). Neighbouring pixels' rays start close together and head for the same
 * point, so they cross mostly the same boxes. Each child box is tested against the eight rays
 * (each lane its own origin and its own near and far planes); a hit leaf is tested at once,
 * each triangle against the lanes that hit its box, in slot order; then the hit inner
 * children are pushed last slot first and the top is popped, as `trace` does for an any-hit
 * ray. A lane whose ray found an occluder is done: its tmax becomes -1, so no box or triangle
 * test passes for it any more, and the packet stops when every lane is done or the stack is
 * empty. Lanes whose pixel missed, faces away from the light or lies beyond the image start
 * done. Per lane this is `shadow`'s answer: the same segment, the same triangle test, and any
 * occluder below tmax occludes whatever order it is met in.
 * COUNTERS: each pixel gets its packet's node steps and triangle tests. */

/* Child C of the node: its box against the live lanes; a hit leaf is tested now (a lane with
 * a hit in (0, tmax) is occluded, its tmax set to -1), a hit inner child marked for pushing. */
#define SHADOW_CHILD(C, BIT)                                                                 \
    {                                                                                        \
        PACKET_BOX(C, tmax, tn, hit)                                                         \
        if (ANY8(hit)) {                                                                     \
            if (cnt.C > 0) {                                                                 \
                COUNT(tests += cnt.C);                                                       \
                for (int k = idx.C; k < idx.C + cnt.C; ++k) {                                \
                    float8 t, u, v;                                                          \
                    int8 ok = packet_triangle(tris, k, ox, oy, oz, dx, dy, dz, hit, tmax,    \
                                              &t, &u, &v);                                   \
                    tmax = ok ? (float8)(-1.0f) : tmax;                                      \
                }                                                                            \
            } else {                                                                         \
                inner |= BIT;                                                                \
            }                                                                                \
        }                                                                                    \
    }

#define SHADOW_PUSH(C, BIT) \
    if (inner & BIT) stack[sp++] = idx.C;

/* Lane L's pixel (x0 + L % 4, y0 + L / 4): its visibility as `shadow` writes it. */
#define STORE_SHADOW_LANE(L, S)                                                              \
    if (x0 + (L & 3) < width && y0 + (L >> 2) < height) {                                    \
        int i = (y0 + (L >> 2)) * width + x0 + (L & 3);                                      \
        visibility[i] = traced.S ? (tmax.S < 0.0f ? 0.0f : 1.0f) : lit[L];                   \
        STORE_COUNTERS(i);                                                                   \
    }

__kernel void shadow_packet(__global const float8* nodes, __global const float4* tris,
                            __global const float4* normals, const float4 eye,
                            const float4 top_left, const float4 du, const float4 dv,
                            const int width, const int height, const float4 light,
                            const float scene_scale, __global const float4* hits,
                            __global float* visibility COUNTER_ARG) {
    int x0 = get_global_id(0) * PACKET_COLS, y0 = get_global_id(1) * PACKET_ROWS;
    if (x0 >= width || y0 >= height) return;
    /* each lane's ray, set up as `shadow` does; a lane not traced keeps tmax -1 and its
     * visibility in lit[] (1: the primary ray missed, 0: the light is behind the surface) */
    float o[3 * 8], d[3 * 8], start[8], lit[8];
    for (int lane = 0; lane < 8; ++lane) {
        int x = x0 + (lane & 3), y = y0 + (lane >> 2);
        float3 origin = (float3)(0.0f), to_light = (float3)(1.0f);
        start[lane] = -1.0f;
        lit[lane] = 1.0f;
        if (x < width && y < height) {
            float4 h = hits[y * width + x];
            int prim = as_int(h.w);
            if (prim >= 0) {
                float3 dir = primary_dir(top_left, du, dv, x, y);
                float3 n = facing_normal(normals, prim, dir);
                origin = offset_origin(eye.xyz + h.x * dir, n, scene_scale);
                to_light = light.xyz - origin;
                if (DOT3(to_light, n) <= 0.0f)
                    lit[lane] = 0.0f;
                else
                    start[lane] = 1.0f - SHADOW_EPS;
            }
        }
        o[lane] = origin.x;
        o[8 + lane] = origin.y;
        o[16 + lane] = origin.z;
        d[lane] = to_light.x;
        d[8 + lane] = to_light.y;
        d[16 + lane] = to_light.z;
    }
    float8 tmax = VLOAD8(0, start);
    int8 traced = tmax > (float8)(0.0f);
    int steps = 0, tests = 0;
    if (ANY8(traced)) {
        float8 ox = VLOAD8(0, o), oy = VLOAD8(1, o), oz = VLOAD8(2, o);
        float8 dx = VLOAD8(0, d), dy = VLOAD8(1, d), dz = VLOAD8(2, d);
        PACKET_RAYS(ox, oy, oz)
        int stack[STACK_SIZE];
        int sp = 0, node = 0;
        for (;;) {
            if (node < 0) {
                if (sp == 0) break;
                node = stack[--sp];
            }
            COUNT(steps++);
            __global const float8* n = nodes + 8 * node;
            float8 lox = n[0], hix = n[1], loy = n[2], hiy = n[3], loz = n[4], hiz = n[5];
            int8 idx = as_int8(n[6]), cnt = as_int8(n[7]);
            int inner = 0;
            SHADOW_CHILD(s0, 1) SHADOW_CHILD(s1, 2) SHADOW_CHILD(s2, 4) SHADOW_CHILD(s3, 8)
            SHADOW_CHILD(s4, 16) SHADOW_CHILD(s5, 32) SHADOW_CHILD(s6, 64) SHADOW_CHILD(s7, 128)
            node = -1;
            if (!ANY8(tmax > (float8)(0.0f))) break; /* every lane occluded */
            SHADOW_PUSH(s7, 128) SHADOW_PUSH(s6, 64) SHADOW_PUSH(s5, 32) SHADOW_PUSH(s4, 16)
            SHADOW_PUSH(s3, 8) SHADOW_PUSH(s2, 4) SHADOW_PUSH(s1, 2) SHADOW_PUSH(s0, 1)
        }
    }
    STORE_SHADOW_LANE(0, s0) STORE_SHADOW_LANE(1, s1) STORE_SHADOW_LANE(2, s2)
    STORE_SHADOW_LANE(3, s3) STORE_SHADOW_LANE(4, s4) STORE_SHADOW_LANE(5, s5)
    STORE_SHADOW_LANE(6, s6) STORE_SHADOW_LANE(7, s7)
}
