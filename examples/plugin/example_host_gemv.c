/* An outside NVFP4 kernel, written against nothing but the installed ABI header: a plain C
 * host GEMV (y = alpha * A x per batch) with FP32 accumulation, ue4m3 scales, both scale
 * layouts, any shape. Build it with examples/plugin/CMakeLists.txt and check it with
 *   nvfp4check run --plugin ./libexample_host_gemv.so --kernel example_host_gemv */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <nvfp4check/nvfp4_kernel_abi.h>

#define EXPORT __attribute__((visibility("default")))

static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static float e2m1(unsigned code) { return (code & 8u) ? -kE2m1[code & 7u] : kE2m1[code & 7u]; }

/* ue4m3: the sign bit is ignored; 0x7F and 0xFF are NaN; exponent 0 is subnormal m * 2^-9. */
static float ue4m3(unsigned byte) {
  const unsigned e = (byte >> 3) & 15u, m = byte & 7u;
  if ((byte & 0x7Fu) == 0x7Fu) return NAN;
  return e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8u + m), (int)e - 10);
}

static int64_t scale_index(uint32_t layout, int64_t rows, int64_t kb, int64_t b, int64_t i, int64_t s) {
  if (layout == NVFP4_SF_LINEAR) return (b * rows + i) * kb + s;
  return ((b * ((rows + 127) / 128) + i / 128) * ((kb + 3) / 4) + s / 4) * 512 + (i % 32) * 16 +
         ((i % 128) / 32) * 4 + s % 4;
}

/* float -> binary16, round to nearest even, subnormals kept, >= 65520 to Inf. */
static uint16_t to_half(float f) {
  uint32_t x, ax;
  uint16_t sign;
  memcpy(&x, &f, sizeof x);
  sign = (uint16_t)((x >> 16) & 0x8000u);
  ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);   /* NaN */
  if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  /* 65520 and up: Inf */
  if (ax >= 0x38800000u) {                                    /* normal half */
    const uint32_t r = ax - (112u << 23);
    return (uint16_t)(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
  } else {
    /* Subnormal half: |f| * 2^24 rounded to an integer, ties to even. Exact in float:
     * scaling by a power of two, then nearbyintf in the default rounding mode (to nearest even). */
    float units;
    memcpy(&f, &ax, sizeof f);
    units = nearbyintf(f * 16777216.0f);
    return (uint16_t)(sign | (uint16_t)units);
  }
}

static const nvfp4_kernel_info kInfo = {
    NVFP4_ABI_VERSION, "example_host_gemv", NVFP4_MEMORY_HOST, 1u << NVFP4_OP_GEMV,
    (1u << NVFP4_SF_LINEAR) | (1u << NVFP4_SF_PERMUTED), 0, 1, 1, 1, 0};

EXPORT int nvfp4_kernel_count(void) { return 1; }

EXPORT const nvfp4_kernel_info *nvfp4_kernel_get(int index) { return index == 0 ? &kInfo : NULL; }

EXPORT int nvfp4_kernel_run(int index, const nvfp4_problem *p) {
  int64_t b, i, x, kb;
  if (index != 0) return NVFP4_ERROR;
  /* Outside what kInfo declares (or not a valid problem): refuse, touching nothing. */
  if (!p || p->op != NVFP4_OP_GEMV || p->n != 1 || p->m < 1 || p->l < 1 || p->k < 2 || p->k % 2 ||
      (p->sf_layout != NVFP4_SF_LINEAR && p->sf_layout != NVFP4_SF_PERMUTED) || !p->a || !p->b ||
      !p->sfa || !p->sfb || !p->c)
    return NVFP4_UNSUPPORTED;
  kb = (p->k + 15) / 16;
  for (b = 0; b < p->l; ++b) {
    const uint8_t *xv = p->b + b * (p->k / 2);
    for (i = 0; i < p->m; ++i) {
      const uint8_t *row = p->a + (b * p->m + i) * (p->k / 2);
      float acc = 0.0f, block = 0.0f;
      for (x = 0; x < p->k; ++x) {
        const unsigned ac = (x & 1) ? row[x / 2] >> 4 : row[x / 2] & 15u;
        const unsigned xc = (x & 1) ? xv[x / 2] >> 4 : xv[x / 2] & 15u;
        block += e2m1(ac) * e2m1(xc);
        if (x % 16 == 15 || x == p->k - 1) { /* end of scale block s = x / 16 */
          const int64_t s = x / 16;
          acc += block * (ue4m3(p->sfa[scale_index(p->sf_layout, p->m, kb, b, i, s)]) *
                          ue4m3(p->sfb[scale_index(p->sf_layout, 1, kb, b, 0, s)]));
          block = 0.0f;
        }
      }
      p->c[b * p->m + i] = to_half(p->alpha * acc);
    }
  }
  return NVFP4_OK;
}
