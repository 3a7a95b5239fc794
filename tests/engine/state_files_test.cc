// SPDX-License-Identifier: MIT
// Saved states that pass their checksums but must still be refused (issue 41): a slot file whose
// state holds NaN or infinity, a state at a position that would wrap, temporaries a killed writer
// left in the shared folder; and checkpoint tensors the config does not describe.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/prefix_store.h"
#include "engine/scheduler.h"
#include "engine/slot_file.h"
#include "engine/state_file.h"
#include "io/binary_codec.h"
#include "io/safetensors.h"

namespace mb {
namespace {

namespace fs = std::filesystem;

const Model& files_model() {
  static const auto model = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 97);
    o.seed = 31;
    return Model::load(test::write_model(o, "state_files_model"));
  }();
  return *model;
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void put_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Rewrites the checksum of bytes [from, to) stored right after them.
void reseal(std::vector<uint8_t>& bytes, size_t from, size_t to) {
  const uint64_t sum = binary::fnv1a64(bytes.data() + from, to - from);
  std::memcpy(bytes.data() + to, &sum, 8);
}

constexpr size_t kStateHeader = 40;  // state_file.h: magic, version, arch, fingerprint, count, position

// A slot file of `tokens` whose state's value `index` is `value`, both checksums valid.
void write_poisoned_slot(const std::string& path, std::span<const int32_t> tokens, size_t index,
                         float value) {
  save_slot_file(path, files_model(), tokens, test::state_after(files_model(), tokens));
  std::vector<uint8_t> bytes = file_bytes(path);
  const size_t state_at = 8 + 4 + 8 + tokens.size() * 4 + 8;
  const size_t state_end = bytes.size() - 8 - 8;  // before the state's checksum
  std::memcpy(bytes.data() + state_at + kStateHeader + index * 4, &value, 4);
  reseal(bytes, state_at, state_end);
  reseal(bytes, 0, bytes.size() - 8);
  put_bytes(path, bytes);
}

TEST(StateFiles, ASlotFileWithANonFiniteStateIsRefusedAndRemoved) {
  const std::string dir = test::make_temp_dir("state_files_nan");
  const auto tokens = test::random_tokens(9, 97, 4);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    write_poisoned_slot(dir + "/named.mbslot", tokens, 5, bad);
    try {
      load_slot_file(dir + "/named.mbslot", files_model());
      ADD_FAILURE() << "a slot file holding " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not finite"), std::string::npos) << e.what();
    }
  }
  // The shared store skips it and removes it, so a later write can replace it.
  PrefixStore store(files_model(), {.folder = dir});
  write_poisoned_slot(dir + "/" + store.file_name(tokens), tokens, 0,
                      -std::numeric_limits<float>::infinity());
  EXPECT_FALSE(store.find_longest(tokens, 1, tokens.size()).has_value());
  EXPECT_EQ(store.counters().rejected, 1u);
  EXPECT_FALSE(fs::exists(dir + "/" + store.file_name(tokens)));
}

// Version 1 files hold fingerprints built before the config keys were declared: they are refused
// as an older version's, not as another model's.
TEST(StateFiles, VersionOneFilesAreRefusedAsAnOlderVersions) {
  const std::string dir = test::make_temp_dir("state_files_version");
  const std::vector<int32_t> tokens{3, 4, 5};
  save_state(dir + "/a.state", files_model(), test::state_after(files_model(), tokens));
  save_slot_file(dir + "/a.mbslot", files_model(), tokens, test::state_after(files_model(), tokens));
  const uint32_t old_version = 1;
  for (const std::string name : {"a.state", "a.mbslot"}) {
    std::vector<uint8_t> bytes = file_bytes(dir + "/" + name);
    std::memcpy(bytes.data() + 8, &old_version, 4);
    reseal(bytes, 0, bytes.size() - 8);
    put_bytes(dir + "/" + name, bytes);
  }
  for (const auto& load :
       std::vector<std::function<void()>>{[&] { load_state(dir + "/a.state", files_model()); },
                                          [&] { load_slot_file(dir + "/a.mbslot", files_model()); }}) {
    try {
      load();
      ADD_FAILURE() << "a version 1 file was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("written by an older version of mambacpp"), std::string::npos)
          << e.what();
    }
  }
}

TEST(StateFiles, APositionThatWouldWrapIsRefused) {
  const std::string dir = test::make_temp_dir("state_files_position");
  const std::vector<int32_t> tokens{3, 4, 5};
  save_state(dir + "/a.state", files_model(), test::state_after(files_model(), tokens));
  std::vector<uint8_t> bytes = file_bytes(dir + "/a.state");
  const int64_t huge = std::numeric_limits<int64_t>::max() - 1;
  std::memcpy(bytes.data() + 32, &huge, 8);
  reseal(bytes, 0, bytes.size() - 8);
  put_bytes(dir + "/a.state", bytes);
  try {
    load_state(dir + "/a.state", files_model());
    ADD_FAILURE() << "a state at position 2^63 - 2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the positions a state may reach"), std::string::npos)
        << e.what();
  }
  // A state already at the bound cannot take another token.
  SequenceState state = test::state_after(files_model(), tokens);
  state.position = int64_t{1} << 40;
  try {
    test::prefill(files_model(), ComputeContext{1, best_isa()}, {6}, state, {OutputKind::None, 0});
    ADD_FAILURE() << "a state at position 2^40 took one more token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("largest position a state may reach"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(state.position, int64_t{1} << 40);
}

TEST(StateFiles, TemporariesAKilledWriterLeftAreReclaimedAndCounted) {
  const std::string dir = test::make_temp_dir("state_files_tmp");
  const auto tokens = test::random_tokens(6, 97, 8);
  std::string name;
  {
    PrefixStore probe(files_model(), {.folder = dir});
    name = probe.file_name(tokens);
  }
  // Two a killed writer left an hour ago (a prefix file's and a named slot's), one being written now.
  const std::string stale = dir + "/" + name + ".tmp-0123456789abcdef";
  const std::string stale_slot = dir + "/named.mbslot.tmp-fedcba9876543210";
  const std::string live = dir + "/" + name + ".tmp-00000000000000aa";
  for (const std::string& path : {stale, stale_slot, live}) put_bytes(path, std::vector<uint8_t>(4096, 7));
  const timespec hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, stale.c_str(), hour_ago, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, stale_slot.c_str(), hour_ago, 0), 0);

  // A budget the prefix's slot file fits alone, with 2 KiB to spare.
  const std::string elsewhere = test::make_temp_dir("state_files_tmp_size") + "/slot.mbslot";
  save_slot_file(elsewhere, files_model(), tokens, test::state_after(files_model(), tokens));
  const uint64_t budget = fs::file_size(elsewhere) + 2048;

  PrefixStore store(files_model(), {.folder = dir, .budget_bytes = budget});
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_slot));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_EQ(store.counters().evicted, 2u);
  // The live temporary's 4096 bytes count against the budget: with them the new file does not fit,
  // and is evicted at once.
  store.save(tokens, test::state_after(files_model(), tokens));
  store.flush();
  EXPECT_EQ(store.counters().written, 1u);
  EXPECT_EQ(store.counters().evicted, 3u);
  EXPECT_FALSE(fs::exists(dir + "/" + name));
  EXPECT_TRUE(fs::exists(live));
}

// A server with a slot folder but no shared store reclaims the folder's stale temporaries too.
TEST(StateFiles, ASchedulerReclaimsItsSlotFoldersStaleTemporaries) {
  const std::string dir = test::make_temp_dir("state_files_slot_tmp");
  const std::string stale = dir + "/named.tmp-0123456789abcdef", live = dir + "/other.tmp-0123456789abcdef";
  const std::string kept = dir + "/notes.tmp-draft";  // not a temporary's name
  for (const std::string& path : {stale, live, kept}) put_bytes(path, std::vector<uint8_t>(16, 1));
  const timespec hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, stale.c_str(), hour_ago, 0), 0);
  ASSERT_EQ(::utimensat(AT_FDCWD, kept.c_str(), hour_ago, 0), 0);
  SchedulerOptions options;
  options.slot_save_path = dir;
  Scheduler scheduler(files_model(), nullptr, ComputeContext{1, best_isa()}, options);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(kept));
}

TEST(StateFiles, ATensorTheConfigDoesNotDescribeIsRefusedNamingIt) {
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  const std::string dir = test::write_model(o, "state_files_extra");
  SafetensorsWriter writer;
  {
    const TensorSet tensors = TensorSet::open_dir(dir);
    for (const auto& [name, t] : tensors.tensors())
      writer.add(name, *t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.byte_size));
    // A bias the config turns off (use_bias is false), as a checkpoint of another variant has it.
    writer.add_f32("backbone.layers.1.mixer.out_proj.bias", {32}, std::vector<float>(32, 0.5f), DType::F32);
    // Tensors real checkpoints carry that the engine knowingly skips.
    writer.add_f32("mtp.layers.0.norm.weight", {32}, std::vector<float>(32, 1.0f), DType::F32);
  }
  writer.write(dir + "/model.safetensors");
  try {
    Model::load(dir);
    ADD_FAILURE() << "an undescribed tensor was ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'backbone.layers.1.mixer.out_proj.bias' [32]"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("the config does not describe it"), std::string::npos) << e.what();
  }
}

TEST(StateFiles, KnownSkippedTensorsStillLoad) {
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  const std::string dir = test::write_model(o, "state_files_skipped");
  const float before = [&] {
    const auto model = Model::load(dir);
    SequenceState s = model->new_state();
    return test::step_logits(*model, ComputeContext{1, best_isa()}, {1, 2}, s)[5];
  }();
  SafetensorsWriter writer;
  {
    const TensorSet tensors = TensorSet::open_dir(dir);
    for (const auto& [name, t] : tensors.tensors())
      writer.add(name, *t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.byte_size));
    // A tied checkpoint's stored head copy, and a multi-token-prediction layer.
    writer.add_f32("lm_head.weight", {104, 32}, std::vector<float>(104 * 32, 0.25f), DType::F32);
    writer.add_f32("mtp.layers.0.norm.weight", {32}, std::vector<float>(32, 1.0f), DType::F32);
  }
  writer.write(dir + "/model.safetensors");
  const auto model = Model::load(dir);
  SequenceState s = model->new_state();
  EXPECT_EQ(test::step_logits(*model, ComputeContext{1, best_isa()}, {1, 2}, s)[5], before);
}

}  // namespace
}  // namespace mb
