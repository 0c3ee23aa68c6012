// Why an output that should be NaN is a number: the NaN scale byte behind it (which tensor, batch
// or group, row and block, its hex value) and, where one can tell, the value the kernel used for
// it instead (solved from the output, and matched against the usual misdecodings of 0x7F).
#pragma once

#include <string>

#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4 {

// "" unless the first failing element of s is NaN in the reference and a number in the output.
std::string nan_scale_hint(const Problem& p, const OracleSummary& s);

}  // namespace nvfp4
