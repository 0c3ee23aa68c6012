// Why an output that should be NaN is a number: the NaN scale byte behind it (which tensor, batch
// or group, row and block, its hex value) and, where one can tell, the value the kernel used for
// it instead (solved from the output, and matched against the usual misdecodings of 0x7F). With MX
// operands also E8M0's NaN 0xFF, NaN elements (E4M3, E5M2) and E5M2 Inf elements whose products
// make NaN (Inf times 0, Infs of both signs, alpha = 0), each with the value a kernel apparently
// read for it (0xFF as 2^128 or 2^127, 1 or 0; a NaN or Inf element as a normal number, the
// largest finite or 0), an Inf output included where that value overflows.
#pragma once

#include <string>

#include "reference/oracle.h"
#include "reference/problem.h"

namespace nvfp4 {

// "" unless the first failing element of s is NaN in the reference and a number in the output
// (a finite one for NVFP4 operands; with MX operands Inf too).
std::string nan_scale_hint(const Problem& p, const OracleSummary& s);

}  // namespace nvfp4
