/* FROZEN: version 1 of the nvfp4check kernel ABI, field for field as released (SPEC.md revision 2),
 * kept so a test can build a plugin exactly as an outside kernel written for version 1 was built
 * and prove it still loads and passes (SPEC.md section 5, "Versions"). Never edit it. */
#ifndef NVFP4_KERNEL_ABI_H
#define NVFP4_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVFP4_ABI_VERSION 1

enum { NVFP4_OP_GEMV = 1, NVFP4_OP_GEMM = 2 };            /* info.ops has bit (1u << op) */
enum { NVFP4_SF_LINEAR = 1, NVFP4_SF_PERMUTED = 2 };      /* info.sf_layouts has bit (1u << layout) */
enum { NVFP4_MEMORY_HOST = 1, NVFP4_MEMORY_CUDA = 2 };
enum { NVFP4_OK = 0, NVFP4_UNSUPPORTED = 1, NVFP4_ERROR = 2 };

#define NVFP4_FLAG_SIGNED_SCALES    (1u << 0)  /* e4m3 semantics; default ue4m3 */
#define NVFP4_FLAG_NONDETERMINISTIC (1u << 1)  /* run-to-run bit differences allowed */
#define NVFP4_FLAG_FP16_ACCUMULATE  (1u << 2)  /* judged with the fp16-accum policy */
#define NVFP4_FLAG_SATURATES        (1u << 3)  /* clamps to +-65504 instead of +-Inf */
#define NVFP4_FLAG_EXACT            (1u << 4)  /* accumulates exactly: judged with `exact` */
#define NVFP4_FLAG_UNIT_ALPHA       (1u << 5)  /* supports alpha == 1.0 only */
#define NVFP4_FLAG_MMA_ACCUMULATE   (1u << 6)  /* adds on matrix units (tensor cores): section 3 */

typedef struct nvfp4_kernel_info {
  uint32_t abi_version;        /* NVFP4_ABI_VERSION */
  const char *name;            /* unique, [a-z0-9_]+ */
  uint32_t memory;             /* where a, b, sfa, sfb, c live */
  uint32_t ops, sf_layouts;    /* bit sets, see above */
  uint32_t min_sm;             /* lowest CUDA compute capability * 10, 0 for host kernels */
  uint32_t m_multiple, n_multiple, k_multiple;   /* shape constraints, 1 = none */
  uint32_t flags;
} nvfp4_kernel_info;

typedef struct nvfp4_problem {
  uint32_t op;
  int64_t m, n, k, l;
  const uint8_t *a, *b, *sfa, *sfb;   /* layouts of section 2 */
  uint32_t sf_layout;
  float alpha;
  uint16_t *c;                  /* FP16 bits */
  void *stream;                 /* cudaStream_t for CUDA kernels, NULL for host kernels */
} nvfp4_problem;

/* A plugin exports these three symbols with C linkage. */
int nvfp4_kernel_count(void);
const nvfp4_kernel_info *nvfp4_kernel_get(int index);
int nvfp4_kernel_run(int index, const nvfp4_problem *problem);

#ifdef __cplusplus
}
#endif

#endif /* NVFP4_KERNEL_ABI_H */
