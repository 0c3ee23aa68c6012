// The list of built-in kernels, one line each (see kernels/builtin.h for how to add one).
// Included by kernels/builtin.cc only, with NVFP4_BUILTIN_HOST / NVFP4_BUILTIN_CUDA defined;
// CUDA entries vanish in a build without CUDA. No include guard on purpose: it is an X-macro list.

// Host kernels (OpenMP, FP32 accumulation): run everywhere, the CI baseline.
NVFP4_BUILTIN_HOST(host_gemv_fp32)
NVFP4_BUILTIN_HOST(host_gemm_fp32)
NVFP4_BUILTIN_HOST(host_gemm_fp32_e4m3)
NVFP4_BUILTIN_HOST(host_grouped_gemm_fp32)
NVFP4_BUILTIN_HOST(host_grouped_gemm_fp32_packed)
NVFP4_BUILTIN_HOST(host_dual_gemm_fp32)
NVFP4_BUILTIN_HOST(host_gemm_nvfp4_out)
NVFP4_BUILTIN_HOST(host_dual_gemm_nvfp4_out)
NVFP4_BUILTIN_HOST(host_grouped_gemm_nvfp4_out)
NVFP4_BUILTIN_HOST(host_mx_gemv_fp32)
NVFP4_BUILTIN_HOST(host_mx_gemm_fp32)
NVFP4_BUILTIN_HOST(host_quantize_nvfp4)
NVFP4_BUILTIN_HOST(host_quantize_nvfp4_2d)
NVFP4_BUILTIN_HOST(host_quantize_nvfp4_rows)
NVFP4_BUILTIN_HOST(host_quantize_mx)
NVFP4_BUILTIN_HOST(host_quantize_nvfp4_sr)

// CUDA kernels.
NVFP4_BUILTIN_CUDA(gemv_naive)
NVFP4_BUILTIN_CUDA(gemm_naive)
NVFP4_BUILTIN_CUDA(cublaslt_nvfp4)
NVFP4_BUILTIN_CUDA(gemv_fast)
NVFP4_BUILTIN_CUDA(gemm_tc)
NVFP4_BUILTIN_CUDA(grouped_gemm_naive)
NVFP4_BUILTIN_CUDA(grouped_gemm_naive_packed)
NVFP4_BUILTIN_CUDA(dual_gemm_naive)
NVFP4_BUILTIN_CUDA(grouped_gemm_tc)
NVFP4_BUILTIN_CUDA(quantize_naive)
NVFP4_BUILTIN_CUDA(quantize_fast)
NVFP4_BUILTIN_CUDA(quantize_mx)
NVFP4_BUILTIN_CUDA(quantize_sr)
NVFP4_BUILTIN_CUDA(mx_gemm_naive)
NVFP4_BUILTIN_CUDA(mx_gemm_tc)
NVFP4_BUILTIN_CUDA(gemm_nvfp4_out_naive)
