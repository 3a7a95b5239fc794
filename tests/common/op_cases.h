// SPDX-License-Identifier: MIT
// The op-case registry, after llama.cpp's test-backend-ops: every op of backends/backend.h over
// awkward shapes and dtypes, each case run on every backend (tests/ops/backend_ops_test.cc: each
// CPU instruction set and thread count; tests/vulkan/backend_ops_test.cc: the Vulkan device) and
// checked against its double reference and, bit for bit, against the CPU's scalar kernels.
//
// A case body (op_harness.h) builds its inputs from fixed seeds, issues its ops through the
// Backend interface only, and computes the expected contents with the references of src/ops, so
// a case is the same test on every backend. Adding an op to the interface means adding its cases.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "common/op_harness.h"

namespace mb::test {

// NMSE against the double reference of ops whose arithmetic is one fixed sequence of f32
// operations: the tier DEVELOPERS.md gives a device without an exact fma, which tests/vulkan has
// always used. Each f32 rounding on an element's chain adds at most 2^-48 (about 4e-15) to its
// squared relative error; the worst case of the registry, a scan, is about 3e-12. The bound catches
// a wrong result; the bitwise tier (the scalar kernels' bits) catches any other difference.
inline constexpr double kFloatNmse = 1e-7;

struct OpCase {
  std::string op;    // "matmul", as op_kind_name names the kinds (embed, write_rows too)
  std::string vars;  // "m=9 n=70 k=33 bf16 bias accumulate norm"
  double tolerance = kFloatNmse;
  std::vector<OpQuery> queries;  // what a backend must support to run it
  // Runs a batched op over several parts of a round: Vulkan also runs it on a context without
  // buffer arrays, which takes one dispatch per part.
  bool several_parts = false;
  std::function<void(OpRun&)> body;

  // "matmul_m9_n70_k33_bf16_bias_accumulate_norm": op and vars as a gtest name.
  std::string name() const;
};

// Every case, in a fixed order, with distinct names.
const std::vector<OpCase>& op_cases();
// The cases a test binary instantiates: all of them, or with `sampled` (test::sampled_sweeps(),
// for runs 5-50x slower than native) every third case of each op.
std::vector<const OpCase*> selected_cases(bool sampled);
// gtest prints a case as its op and vars.
void PrintTo(const OpCase* c, std::ostream* os);

// The reference run of a case, with a failure where the reference writes floats the case does
// not declare as written (a case's own mistake).
OpRecord reference_record(const OpCase& c);
// Every op name of the Backend interface (the registry has cases for each).
std::vector<std::string> backend_op_names();

// The reason `backend` gives for not running one of the case's queries, or "".
std::string why_unsupported(const OpCase& c, const Backend& backend);

// The cases of each op (op_cases_*.cc).
void add_matmul_cases(std::vector<OpCase>& cases);
void add_quant_matmul_cases(std::vector<OpCase>& cases);
void add_norm_cases(std::vector<OpCase>& cases);
void add_conv_scan_cases(std::vector<OpCase>& cases);
void add_ssd_scan_cases(std::vector<OpCase>& cases);
void add_row_op_cases(std::vector<OpCase>& cases);
void add_hybrid_cases(std::vector<OpCase>& cases);
void add_moe_cases(std::vector<OpCase>& cases);
void add_short_conv_cases(std::vector<OpCase>& cases);
void add_gdn_cases(std::vector<OpCase>& cases);

}  // namespace mb::test
