// SPDX-License-Identifier: MIT
// Argument parsing of the step programs: defaults, each option, and each way to get it wrong.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "common/cli.h"

namespace softmax {
namespace {

Options parse(std::initializer_list<const char*> args) {
  std::vector<const char*> argv = {"step_program"};
  argv.insert(argv.end(), args);
  return parse_args(static_cast<int>(argv.size()), argv.data());
}

std::string error_of(std::initializer_list<const char*> args) {
  try {
    parse(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Cli, Defaults) {
  const Options o = parse({});
  EXPECT_EQ(o.rows, 4096);
  EXPECT_EQ(o.cols, 0);
  EXPECT_FALSE(o.verify_only);
  EXPECT_GE(o.iters, 20);
  EXPECT_TRUE(o.json_path.empty());
  EXPECT_FALSE(o.help);
}

TEST(Cli, EveryOption) {
  const Options o = parse({"--rows", "17", "--cols", "4097", "--iters", "25", "--verify-only",
                           "--json", "out.json"});
  EXPECT_EQ(o.rows, 17);
  EXPECT_EQ(o.cols, 4097);
  EXPECT_EQ(o.iters, 25);
  EXPECT_TRUE(o.verify_only);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"-h"}).help);
}

TEST(Cli, RejectsBadInputNamingIt) {
  EXPECT_NE(error_of({"--frobnicate"}).find("unknown option '--frobnicate'"), std::string::npos);
  EXPECT_NE(error_of({"--rows"}).find("--rows needs a value"), std::string::npos);
  EXPECT_NE(error_of({"--rows", "12x"}).find("--rows expects an integer, got '12x'"), std::string::npos);
  EXPECT_NE(error_of({"--cols", ""}).find("--cols expects an integer"), std::string::npos);
  EXPECT_NE(error_of({"--cols", "0"}).find("--cols must be >= 1"), std::string::npos);
  EXPECT_NE(error_of({"--rows", "-3"}).find("--rows must be >= 1"), std::string::npos);
  EXPECT_NE(error_of({"--iters", "5"}).find("--iters must be >= 20"), std::string::npos);
  EXPECT_NE(error_of({"--cols", "99999999999"}).find("--cols expects an integer"), std::string::npos);
  EXPECT_NE(error_of({"--json"}).find("--json needs a value"), std::string::npos);
}

TEST(Cli, ParsesShapesAndNamesBadOnes) {
  const RowsCols s = parse_shape("50x50001");
  EXPECT_EQ(s.rows, 50);
  EXPECT_EQ(s.cols, 50001);
  for (const char* bad : {"50", "50x", "x7", "0x7", "7x-1", "7x7x7", "axb"}) {
    try {
      parse_shape(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find(bad) != std::string::npos || what.find("ROWS") != std::string::npos ||
                  what.find("COLS") != std::string::npos)
          << what;
    }
  }
}

TEST(Cli, SweepCoversTheDocumentedRange) {
  const std::vector<int> cols = sweep_cols();
  ASSERT_FALSE(cols.empty());
  EXPECT_EQ(cols.front(), 256);
  EXPECT_EQ(cols.back(), 16384);
  for (size_t i = 1; i < cols.size(); ++i) EXPECT_LT(cols[i - 1], cols[i]);
}

TEST(Cli, UsageNamesEveryOption) {
  const std::string u = usage("stepXX");
  for (const char* opt : {"--rows", "--cols", "--iters", "--verify-only", "--json", "77"})
    EXPECT_NE(u.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace softmax
