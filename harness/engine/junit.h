// JUnit XML, the format CI dashboards read (Jenkins, GitLab, GitHub test reporters): one
// <testsuite> per command, one <testcase> per kernel. A skipped kernel has <skipped message=...>,
// a failing one <failure message=...> with the failure text and its reproduce line in the body.
#pragma once

#include <string>
#include <vector>

#include "harness/engine/report.h"

namespace nvfp4 {

struct JUnitCase {
  enum class Result { pass, fail, skipped };
  std::string name, classname;  // classname: where the kernel comes from ("builtin", a plugin)
  Result result = Result::pass;
  double seconds = 0;
  std::string message;          // one line: why it failed or was skipped
  std::string body;             // a failure's text, reproduce line included
};

// A kernel's report as a test case (its first failure's text, which ends with the reproduce line).
JUnitCase junit_case(const KernelReport& report);

// The document: <testsuites><testsuite name=suite_name ...> with the cases, counts and time.
std::string junit_xml(const std::string& suite_name, const std::vector<JUnitCase>& cases);

// Writes it to path (throws std::runtime_error when it cannot); check_report_writable checks
// the path first.
void write_junit_file(const std::string& path, const std::string& suite_name, const std::vector<JUnitCase>& cases);

}  // namespace nvfp4
