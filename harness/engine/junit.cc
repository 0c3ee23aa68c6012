// JUnit XML of a run, replay or mutation analysis (see junit.h).
#include "harness/engine/junit.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace nvfp4 {
namespace {

// Text as XML character data or an attribute value. Characters XML 1.0 cannot hold at all
// (control characters other than tab, newline and carriage return, as a kernel's message might
// carry) become '?'.
std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      case '\t': out += "&#9;"; break;
      default: out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
    }
  }
  return out;
}

// Character data keeps its line breaks as they are (only attributes need them as references).
std::string xml_text(const std::string& s) {
  std::string out = xml_escape(s);
  for (size_t at = 0; (at = out.find("&#10;", at)) != std::string::npos;) out.replace(at, 5, "\n");
  return out;
}

}  // namespace

JUnitCase junit_case(const KernelReport& r) {
  JUnitCase c;
  c.name = r.name;
  // Dashboards group by classname: the built-ins, or the plugin's file name.
  const std::string origin = std::filesystem::path(r.origin).stem().string();
  c.classname = origin.empty() ? "nvfp4check" : "nvfp4check." + origin;
  c.seconds = r.seconds;
  if (r.verdict == KernelVerdict::skipped) {
    c.result = JUnitCase::Result::skipped;
    c.message = r.skip_reason.empty() ? "skipped" : r.skip_reason;
  } else if (r.verdict == KernelVerdict::fail) {
    c.result = JUnitCase::Result::fail;
    c.message = r.failure ? fmt::format("{}: {}", check_name(r.failure->check), r.failure->message) : "failed";
    if (r.failure) c.body = r.failure->text;
    if (r.failure && !r.failure->reproduce.empty() && c.body.find(r.failure->reproduce) == std::string::npos)
      c.body += "\nreproduce: " + r.failure->reproduce;
  }
  return c;
}

std::string junit_xml(const std::string& suite_name, const std::vector<JUnitCase>& cases) {
  int failures = 0, skipped = 0;
  double seconds = 0;
  for (const JUnitCase& c : cases) {
    failures += c.result == JUnitCase::Result::fail;
    skipped += c.result == JUnitCase::Result::skipped;
    seconds += c.seconds;
  }
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"{0}\" tests=\"{1}\" failures=\"{2}\" errors=\"0\" skipped=\"{3}\" time=\"{4:.3f}\">\n"
                   "  <testsuite name=\"{0}\" tests=\"{1}\" failures=\"{2}\" errors=\"0\" skipped=\"{3}\" time=\"{4:.3f}\">\n",
                   xml_escape(suite_name), cases.size(), failures, skipped, seconds);
  for (const JUnitCase& c : cases) {
    x += fmt::format("    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3f}\"", xml_escape(c.name),
                     xml_escape(c.classname), c.seconds);
    if (c.result == JUnitCase::Result::pass) {
      x += "/>\n";
      continue;
    }
    if (c.result == JUnitCase::Result::skipped)
      x += fmt::format(">\n      <skipped message=\"{}\"/>\n", xml_escape(c.message));
    else
      x += fmt::format(">\n      <failure message=\"{}\" type=\"failure\">{}</failure>\n", xml_escape(c.message),
                       xml_text(c.body));
    x += "    </testcase>\n";
  }
  x += "  </testsuite>\n</testsuites>\n";
  return x;
}

void write_junit_file(const std::string& path, const std::string& suite_name, const std::vector<JUnitCase>& cases) {
  std::ofstream out(path);
  if (out) out << junit_xml(suite_name, cases);
  if (!out) throw std::runtime_error("cannot write the JUnit report " + path);
}

}  // namespace nvfp4
