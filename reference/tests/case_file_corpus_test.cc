// Every case file under corpus/ read and written again, against a record of what the parser and
// writer made of it when the record was taken: the case format is a contract with every saved
// case, so a change to how keys are declared must leave each file's Problem (seen through the
// text write_case makes of it) and each rejected file's message exactly as they were.
//
// The record (case_file_corpus.golden) holds one line per file: its path under corpus/, "ok" and
// the FNV-1a of write_case's text, or "error" and the line the parser names. (Not the message:
// messages list the ops and keys there are, so a new op would change them; case_file_test holds
// the wording.) Set
// NVFP4_CASE_GOLDEN_OUT=FILE to write the record this build makes instead of comparing (after a
// deliberate change of the format, or for a new corpus file).
#include "reference/case_file.h"
#include "reference/stable_hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace nvfp4 {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = fs::path(NVFP4_SOURCE_DIR) / "corpus";
const fs::path kGolden = fs::path(NVFP4_SOURCE_DIR) / "reference" / "tests" / "case_file_corpus.golden";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every case file of the corpus: the *.case files of every folder and the case-file fuzzer's
// seeds (corpus/case_file holds inputs named by their hash, valid or not, beside its README).
std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(kCorpus)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), kCorpus);
    const bool fuzz_seed = rel.begin()->string() == "case_file" && e.path().extension() != ".md";
    if (e.path().extension() == ".case" || fuzz_seed) files.push_back(rel.generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Outcome {
  bool ok = false;
  std::string text;  // write_case's text, or the parser's message
};

// The file read under its corpus path (not the machine's), so messages are the same everywhere.
Outcome read_and_write(const std::string& rel) {
  try {
    return {true, write_case(parse_case(read_text(kCorpus / rel), rel))};
  } catch (const CaseError& e) {
    return {false, e.what()};
  }
}

std::string record_line(const std::string& rel, const Outcome& o) {
  if (!o.ok) {
    // "PATH:LINE: what": the line the parser names.
    const size_t at = rel.size() + 1;
    return rel + " error " + o.text.substr(at, o.text.find(':', at) - at);
  }
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, fnv1a(o.text));
  return rel + " ok " + hash;
}

TEST(CaseFileCorpus, EveryFileReadsAndWritesAsRecorded) {
  const std::vector<std::string> files = corpus_files();
  ASSERT_GT(files.size(), 400u) << "corpus/ not found under " << kCorpus;
  if (const char* out_path = std::getenv("NVFP4_CASE_GOLDEN_OUT")) {
    std::ofstream out(out_path, std::ios::binary);
    for (const std::string& rel : files) out << record_line(rel, read_and_write(rel)) << "\n";
    ASSERT_TRUE(out.good()) << "cannot write " << out_path;
    GTEST_SKIP() << "wrote the record of " << files.size() << " files to " << out_path;
  }
  std::map<std::string, std::string> recorded;  // path -> its line
  std::istringstream golden(read_text(kGolden));
  for (std::string line; std::getline(golden, line);)
    if (!line.empty()) recorded[line.substr(0, line.find(' '))] = line;
  ASSERT_GT(recorded.size(), 400u) << "no record at " << kGolden;
  int differ = 0;
  for (const std::string& rel : files) {
    const auto it = recorded.find(rel);
    if (it == recorded.end()) continue;  // a file added since the record: RoundTripIsStable covers it
    const Outcome o = read_and_write(rel);
    if (record_line(rel, o) != it->second && ++differ <= 10)
      ADD_FAILURE() << rel << ": recorded '" << it->second << "', now '" << record_line(rel, o) << "'; it "
                    << (o.ok ? "writes:\n" : "is rejected with: ") << o.text.substr(0, 2000);
  }
  EXPECT_EQ(differ, 0) << differ << " files read or write differently from the record";
  // A recorded file that is gone would shrink what the record checks without anyone noticing.
  for (const auto& [rel, line] : recorded)
    EXPECT_TRUE(fs::exists(kCorpus / rel)) << rel << " is recorded but no longer in corpus/";
}

// What write_case makes of a file reads back to the same text (the writer's output is itself a
// case file of the format), for every file the parser accepts, recorded or not.
TEST(CaseFileCorpus, RoundTripIsStable) {
  int accepted = 0;
  for (const std::string& rel : corpus_files()) {
    const Outcome o = read_and_write(rel);
    if (!o.ok) continue;
    ++accepted;
    EXPECT_EQ(write_case(parse_case(o.text, rel + " (written)")), o.text) << rel;
  }
  EXPECT_GT(accepted, 300);
}

}  // namespace
}  // namespace nvfp4
