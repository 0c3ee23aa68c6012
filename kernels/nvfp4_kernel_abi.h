/* The nvfp4check kernel ABI (SPEC.md section 5): the only interface through which the suite
 * reaches a kernel, built in or loaded from a plugin. Plain C so any toolchain can implement it.
 * Version 2 appends to version 1 and reorders nothing: a plugin built against version 1 keeps
 * loading and passing (the suite reads only its version-1 info fields and hands it only
 * version-1 problems), and version-1 source compiles unchanged against this header. Version 3
 * (revision 4: quantization, block formats, block-scaled output) appends again the same way: a
 * version-1 or version-2 plugin is read and handed problems by its own version's layout. */
#ifndef NVFP4_KERNEL_ABI_H
#define NVFP4_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVFP4_ABI_VERSION 3           /* revision 4; plugins reporting 1 or 2 keep working */

enum { NVFP4_OP_GEMV = 1, NVFP4_OP_GEMM = 2,             /* info.ops has bit (1u << op) */
       NVFP4_OP_GROUPED_GEMM = 3, NVFP4_OP_DUAL_GEMM = 4 };
enum { NVFP4_SF_LINEAR = 1, NVFP4_SF_PERMUTED = 2 };      /* info.sf_layouts has bit (1u << layout) */
enum { NVFP4_MEMORY_HOST = 1, NVFP4_MEMORY_CUDA = 2 };
enum { NVFP4_OUT_FP16 = 1, NVFP4_OUT_BF16 = 2, NVFP4_OUT_FP32 = 3 };  /* info.out_types: bit (1u << t) */
enum { NVFP4_OK = 0, NVFP4_UNSUPPORTED = 1, NVFP4_ERROR = 2 };
/* Version 3. */
enum { NVFP4_OP_QUANTIZE = 5 };
enum { NVFP4_FORMAT_NVFP4 = 1, NVFP4_FORMAT_MXFP4 = 2,        /* info.*_formats: bit (1u << f) */
       NVFP4_FORMAT_MXFP8_E4M3 = 3, NVFP4_FORMAT_MXFP8_E5M2 = 4 };
enum { NVFP4_OUT_NVFP4 = 4 };                               /* block-scaled output */
enum { NVFP4_IN_FP16 = 1, NVFP4_IN_BF16 = 2, NVFP4_IN_FP32 = 3 };   /* info.in_types: bit (1u << t) */
enum { NVFP4_RECIPE_TE = 1, NVFP4_RECIPE_REF = 2, NVFP4_RECIPE_FAST = 3, NVFP4_RECIPE_TORCHAO = 4,
       NVFP4_RECIPE_MX_RCEIL = 5, NVFP4_RECIPE_MX_FLOOR = 6, NVFP4_RECIPE_MX_EVEN = 7 };  /* info.recipes */

#define NVFP4_FLAG_SIGNED_SCALES    (1u << 0)  /* e4m3 semantics; default ue4m3 */
#define NVFP4_FLAG_NONDETERMINISTIC (1u << 1)  /* run-to-run bit differences allowed */
#define NVFP4_FLAG_FP16_ACCUMULATE  (1u << 2)  /* judged with the fp16-accum policy */
#define NVFP4_FLAG_SATURATES        (1u << 3)  /* clamps to the output type's largest finite value */
#define NVFP4_FLAG_EXACT            (1u << 4)  /* accumulates exactly: judged with `exact` */
#define NVFP4_FLAG_UNIT_ALPHA       (1u << 5)  /* supports alpha 1.0 only (alpha2, every group's too) */
#define NVFP4_FLAG_MMA_ACCUMULATE   (1u << 6)  /* adds on matrix units (tensor cores): section 3 */
#define NVFP4_FLAG_GROUPS_PACKED    (1u << 7)  /* grouped GEMM in the packed arrangement: section 2 */
#define NVFP4_FLAG_QUANT_2D          (1u << 8)   /* NVFP4 quantize: one scale per 16 x 16 tile */
#define NVFP4_FLAG_ROW_GLOBAL_SCALE  (1u << 9)   /* one global scale per row (per-token) */
#define NVFP4_FLAG_STOCHASTIC        (1u << 10)  /* codes rounded stochastically from problem->seed */
#define NVFP4_FLAG_SF_PADDING_KEPT   (1u << 11)  /* leaves SFQ's padding cells as they were */

typedef struct nvfp4_kernel_info {
  uint32_t abi_version;        /* NVFP4_ABI_VERSION */
  const char *name;            /* unique, [a-z0-9_]+ */
  uint32_t memory;             /* where a, b, sfa, sfb, c live */
  uint32_t ops, sf_layouts;    /* bit sets, see above */
  uint32_t min_sm;             /* lowest CUDA compute capability * 10, 0 for host kernels */
  uint32_t m_multiple, n_multiple, k_multiple;   /* shape constraints, 1 = none; grouped: per group */
  uint32_t flags;
  /* abi_version >= 2 */
  uint32_t out_types;          /* bit set of NVFP4_OUT_*; 0 means FP16 only */
  uint32_t max_groups;         /* grouped GEMM: most groups per call, 0 = no limit */
  /* abi_version >= 3 */
  uint32_t a_formats, b_formats;   /* bit sets of NVFP4_FORMAT_*; 0 means NVFP4 only */
  uint32_t in_types;               /* quantize: bit set of NVFP4_IN_* */
  uint32_t q_formats;              /* quantize and NVFP4 output: formats it writes; 0 = NVFP4 */
  uint32_t recipes;                /* quantize and NVFP4 output: bit set of NVFP4_RECIPE_* */
} nvfp4_kernel_info;

typedef struct nvfp4_group {   /* one GEMM of a grouped call, l = 1 */
  int64_t m, n, k;             /* m may be 0 */
  const uint8_t *a, *b, *sfa, *sfb;
  void *c;                     /* output words of the problem's out_type */
  float alpha;
} nvfp4_group;

typedef struct nvfp4_group_out {   /* grouped GEMM with NVFP4 output: parallel to group[] */
  uint8_t *q, *sfq;
  float global_scale;
} nvfp4_group_out;

typedef struct nvfp4_problem {
  uint32_t op;
  int64_t m, n, k, l;          /* grouped: m = sum of m_g, n and k the largest, l = 1 */
  const uint8_t *a, *b, *sfa, *sfb;   /* layouts of section 2; grouped: the packed buffers, or NULL */
  uint32_t sf_layout;
  float alpha;
  uint16_t *c;                  /* output words (FP32: 4-byte aligned, 4 bytes each); grouped: packed C or NULL */
  void *stream;                 /* cudaStream_t for CUDA kernels, NULL for host kernels */
  /* abi_version >= 2: a version-1 kernel never reads past here */
  uint32_t out_type;            /* NVFP4_OUT_*, FP16 for every version-1 kernel */
  const uint8_t *b2, *sfb2;     /* dual GEMM: the second B and its scales, else NULL */
  float alpha2;                 /* dual GEMM: U's global scale, else 1 */
  int64_t groups;               /* grouped GEMM: G >= 1, else 0 */
  const nvfp4_group *group;     /* grouped GEMM: G entries in host memory, else NULL */
  const nvfp4_group *group_device;  /* the same entries in device memory (CUDA kernels), else NULL */
  /* abi_version >= 3: a version-1 or version-2 kernel never reads past here */
  uint32_t a_format, b_format;     /* NVFP4_FORMAT_*; NVFP4 for every older kernel */
  uint32_t in_type;                /* quantize: NVFP4_IN_* */
  const void *x;                   /* quantize: the input, l*m*k words of in_type */
  uint8_t *q, *sfq;                /* quantize and NVFP4 output: codes and scales */
  uint32_t q_format, recipe;       /* NVFP4_FORMAT_*, NVFP4_RECIPE_* */
  const float *global_scale;       /* 1 value, or l*m with NVFP4_FLAG_ROW_GLOBAL_SCALE; NULL for MX */
  uint64_t seed;                   /* stochastic rounding */
  const nvfp4_group_out *group_out, *group_out_device;   /* grouped GEMM with NVFP4 output */
} nvfp4_problem;

/* A plugin exports these three symbols with C linkage. */
int nvfp4_kernel_count(void);
const nvfp4_kernel_info *nvfp4_kernel_get(int index);
int nvfp4_kernel_run(int index, const nvfp4_problem *problem);

#ifdef __cplusplus
}
#endif

#endif /* NVFP4_KERNEL_ABI_H */
