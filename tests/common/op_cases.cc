// SPDX-License-Identifier: MIT
#include "common/op_cases.h"

#include <cctype>
#include <map>
#include <set>

#include "core/error.h"

namespace mb::test {

std::string OpCase::name() const {
  // Letters, digits and single underscores: '=' joins a variable to its value, anything else
  // separates words.
  std::string text;
  for (char ch : op + " " + vars) {
    if (ch == '=') continue;
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      text += ch;
    } else if (!text.empty() && text.back() != '_') {
      text += '_';
    }
  }
  while (!text.empty() && text.back() == '_') text.pop_back();
  return text;
}

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> all;
    add_matmul_cases(all);
    add_quant_matmul_cases(all);
    add_norm_cases(all);
    add_conv_scan_cases(all);
    add_ssd_scan_cases(all);
    add_row_op_cases(all);
    add_hybrid_cases(all);
    add_moe_cases(all);
    add_short_conv_cases(all);
    add_gdn_cases(all);
    std::set<std::string> names;
    for (const OpCase& c : all)
      if (!names.insert(c.name()).second) throw Error("two op cases are named " + c.name());
    return all;
  }();
  return cases;
}

std::vector<const OpCase*> selected_cases(bool sampled) {
  std::vector<const OpCase*> selected;
  std::map<std::string, int> seen;
  for (const OpCase& c : op_cases())
    if (!sampled || seen[c.op]++ % 3 == 0) selected.push_back(&c);
  return selected;
}

void PrintTo(const OpCase* c, std::ostream* os) {
  *os << c->op << " " << c->vars;
}

OpRecord reference_record(const OpCase& c) {
  OpRecord reference = run_op(c.body, nullptr, {});
  expect_record(reference, reference, nullptr, c.tolerance, "the reference");
  return reference;
}

std::vector<std::string> backend_op_names() {
  return {
      "matmul", "rms_norm",   "causal_conv", "selective_scan", "mamba2_scan", "gated_rms_norm", "mamba3_scan",
      "embed",  "write_rows", "argmax",      "append_rows",    "attention",   "rope",           "glu",
      "scale",  "moe",        "short_conv",  "gated_delta_net"};
}

std::string why_unsupported(const OpCase& c, const Backend& backend) {
  for (const OpQuery& query : c.queries) {
    const std::string why = backend.why_unsupported(query);
    if (!why.empty()) return why;
  }
  return "";
}

}  // namespace mb::test
