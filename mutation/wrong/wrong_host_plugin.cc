// The wrong host kernels of wrong_host_kernels.cc as a plugin, so the whole `nvfp4check` path
// (worker, failure text, saved case, error map, report, replay) is tested on real failures.
#include "mutation/wrong/wrong_host_kernels.h"

extern "C" {
int nvfp4_kernel_count(void) { return nvfp4::test::wrong_host_kernel_count(); }
const nvfp4_kernel_info* nvfp4_kernel_get(int index) { return nvfp4::test::wrong_host_kernel_get(index); }
int nvfp4_kernel_run(int index, const nvfp4_problem* problem) {
  return nvfp4::test::wrong_host_kernel_run(index, problem);
}
}
