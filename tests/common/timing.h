// SPDX-License-Identifier: MIT
// Time bounds for tests of inputs that once took quadratic time. Wall-clock bounds are fragile
// on shared two-core runners, under sanitizers and under qemu, so these helpers measure the
// calling thread's CPU time and compare sizes rather than fix absolute budgets.
#pragma once

#include <functional>

namespace mb::test {

// The least CPU time of the calling thread, in seconds, over `runs` calls of `work`: the
// minimum discards the runs another process or a page-fault storm slowed down.
double least_cpu_seconds(const std::function<void()>& work, int runs = 3);

// How many times longer `work(4 * n)` takes than `work(n)`. Linear work gives about 4 and
// quadratic work about 16; tests assert a bound such as 8 between the two.
double growth_for_4x(const std::function<void(int n)>& work, int n);

// A time bound measured in a native build, or four times it where every test runs several times
// slower (AddressSanitizer at -O1, ThreadSanitizer, qemu-user: test::sampled_sweeps()). Four
// times still tells linear work from the pathologies these bounds catch, which ran 20-100x over.
double scaled_seconds(double native);

}  // namespace mb::test
