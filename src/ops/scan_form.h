// SPDX-License-Identifier: MIT
// How the Mamba-2 and Mamba-3 scans evaluate a run of positions of one sequence.
#pragma once

namespace mb {

// The sequential recurrence (bit-identical to decode steps, the default), the chunked SSD form
// (equal up to rounding, faster for long runs on some machines), or the backend's choice by the
// run's length. With the chunked form each round is a window continued from the last, so the
// round size changes results within rounding; only the sequential form keeps the exactness
// contract.
enum class ScanForm { Auto, Sequential, Chunked };

}  // namespace mb
