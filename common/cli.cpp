// SPDX-License-Identifier: MIT
#include "common/cli.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "common/timer.h"

namespace softmax {

std::vector<int> sweep_cols() { return {256, 512, 1024, 2048, 4096, 8192, 16384}; }

int parse_int(const std::string& option, const std::string& text, int min_value) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || v > INT_MAX || v < INT_MIN)
    throw UsageError(option + " expects an integer, got '" + text + "'");
  if (v < min_value)
    throw UsageError(option + " must be >= " + std::to_string(min_value) + ", got " + text);
  return static_cast<int>(v);
}

RowsCols parse_shape(const std::string& text) {
  const size_t x = text.find('x');
  if (x == std::string::npos)
    throw UsageError("shape '" + text + "': expected ROWSxCOLS, e.g. 50x50001");
  return {parse_int("ROWS", text.substr(0, x), 1), parse_int("COLS", text.substr(x + 1), 1)};
}

Options parse_args(int argc, const char* const* argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      opt.help = true;
    } else if (arg == "--rows") {
      opt.rows = parse_int(arg, value(), 1);
    } else if (arg == "--cols") {
      opt.cols = parse_int(arg, value(), 1);
    } else if (arg == "--iters") {
      opt.iters = parse_int(arg, value(), kMinRuns);
    } else if (arg == "--verify-only") {
      opt.verify_only = true;
    } else if (arg == "--json") {
      opt.json_path = value();
      if (opt.json_path.empty()) throw UsageError("--json needs a file name");
    } else {
      throw UsageError("unknown option '" + arg + "'");
    }
  }
  return opt;
}

std::string usage(const std::string& program) {
  return "usage: " + program +
         " [--rows M] [--cols N] [--iters K] [--verify-only] [--json FILE]\n"
         "\n"
         "Verifies the softmax on a 1823x781 matrix against a double-precision CPU reference,\n"
         "then measures effective bandwidth (2*M*N*4 bytes / median time, L2 flushed before\n"
         "every timed launch) beside a device-to-device memcpy of the same size.\n"
         "\n"
         "  --rows M        rows of the timed shapes (default 4096)\n"
         "  --cols N        verify and time M x N only, instead of the sweep N = 256..16384\n"
         "  --iters K       timed runs per shape, K >= 20 (default 50)\n"
         "  --verify-only   verify, time nothing\n"
         "  --json FILE     also write the results as JSON\n"
         "\n"
         "exit codes: 0 ok, 1 verification or CUDA failure, 2 bad arguments, 77 no CUDA device\n";
}

}  // namespace softmax
