#include "core/profile.h"

namespace mb {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::Embed:
      return "embed";
    case Phase::Norm:
      return "rmsnorm";
    case Phase::InProj:
      return "in_proj gemm";
    case Phase::Conv:
      return "conv+silu";
    case Phase::XProj:
      return "x_proj gemm";
    case Phase::DtProj:
      return "dt_proj gemm+softplus";
    case Phase::Scan:
      return "selective scan+gate";
    case Phase::GateNorm:
      return "gated rmsnorm";
    case Phase::OutProj:
      return "out_proj gemm+residual";
    case Phase::FinalNorm:
      return "norm_f";
    case Phase::LmHead:
      return "lm_head gemm";
    case Phase::Other:
      return "other";
    case Phase::kCount:
      break;
  }
  return "?";
}

double PhaseProfile::total() const {
  double sum = 0;
  for (double s : seconds) sum += s;
  return sum;
}

}  // namespace mb
