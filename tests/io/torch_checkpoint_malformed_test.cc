// SPDX-License-Identifier: MIT
// Malformed and hostile pytorch_model.bin files are refused with an mb::Error whose message
// names the file and the defect: never a crash, an out-of-bounds read or an executed pickle
// (this suite also runs under ASan + UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "io/zip_archive.h"

namespace mb {
namespace {

std::string le(uint64_t value, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out.push_back(i < 8 ? static_cast<char>(value >> (8 * i)) : '\0');
  return out;
}
// Pickle fragments. (Each starts from a std::string: GCC 12 warns falsely about
// `"literal" + std::string`.)
std::string opcode(char code, const std::string& argument) {
  std::string out(1, code);
  return out += argument;
}
std::string pickle_unicode(const std::string& text) {
  return opcode('X', le(text.size(), 4) + text);
}  // BINUNICODE
std::string pickle_int1(int value) {
  return opcode('K', le(value, 1));
}  // BININT1
std::string int4(int32_t value) {
  return opcode('J', le(static_cast<uint32_t>(value), 4));
}  // BININT
std::string long1(uint64_t value, int bytes) {
  return opcode('\x8a', le(bytes, 1) + le(value, bytes));
}  // LONG1

const std::string kProto = std::string("\x80\x02", 2);
const std::string kOrderedDict = "ccollections\nOrderedDict\n";
const std::string kRebuild = "ctorch._utils\n_rebuild_tensor_v2\n";

// The parts of a one-tensor state_dict pickle that the defects below vary.
struct OneTensor {
  std::string dict_global = kOrderedDict;
  std::string pid_tag = pickle_unicode("storage");
  std::string storage_global = "ctorch\nFloatStorage\n";
  std::string key = "0";
  std::string numel = pickle_int1(4);
  std::string offset = pickle_int1(0);
  std::string size = pickle_int1(4) + "\x85";  // (4,)
  std::string stride = pickle_int1(1) + "\x85";
  std::string name = "w";
};

std::string one_tensor_pickle(const OneTensor& t) {
  return kProto + t.dict_global + ")R" + pickle_unicode(t.name) + kRebuild + "((" + t.pid_tag +
         t.storage_global + pickle_unicode(t.key) + pickle_unicode("cpu") + t.numel + "tQ" + t.offset +
         t.size + t.stride + "\x89" + kOrderedDict + ")Rt" + "R" + "s.";
}

// A torch.save archive under `archive/` with `pickle` and a 16-byte storage "0".
std::vector<uint8_t> archive_with(const std::string& pickle, const std::string& byteorder = "little") {
  ZipWriter zip;
  zip.add("archive/data.pkl", test::bytes_of(pickle));
  zip.add("archive/byteorder", test::bytes_of(byteorder));
  zip.add("archive/data/0", std::vector<uint8_t>(16, 0x3f));
  zip.add("archive/version", test::bytes_of("3\n"));
  return zip.finish();
}

std::string write_temp(const std::vector<uint8_t>& bytes, const std::string& tag) {
  const std::string path = test::make_temp_dir(tag) + "/pytorch_model.bin";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Offset of the first central directory header of a (small, single-disk) archive.
size_t central_header(const std::vector<uint8_t>& zip) {
  const std::vector<ZipEntry> entries = read_zip_directory(zip, "memory");
  for (size_t pos = entries.back().data_offset + entries.back().size; pos + 4 <= zip.size(); ++pos)
    if (std::memcmp(zip.data() + pos, "PK\x01\x02", 4) == 0) return pos;
  ADD_FAILURE() << "no central directory";
  return 0;
}

std::vector<uint8_t> patched(std::vector<uint8_t> zip, size_t offset, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) zip[offset + i] = static_cast<uint8_t>(value >> (8 * i));
  return zip;
}

struct TorchDefect {
  std::string name;
  std::function<std::vector<uint8_t>()> file;
  std::string expected;  // a fragment the error message must contain
};

std::vector<TorchDefect> torch_defects() {
  const std::string good = one_tensor_pickle({});
  auto with = [](auto edit) {
    OneTensor t;
    edit(t);
    return archive_with(one_tensor_pickle(t));
  };
  auto raw = [](const std::string& pickle) { return [pickle] { return archive_with(pickle); }; };
  return {
      // The zip container.
      {"bad_end_record",
       [good] {
         auto z = archive_with(good);
         z[z.size() - 22] = 'X';
         return z;
       },
       "no zip end-of-central-directory record"},
      {"directory_outside_file",
       [good] {
         auto z = archive_with(good);
         return patched(z, z.size() - 98 + 48, 1ull << 40, 8);
       },
       "lies outside the file"},
      {"too_many_entries",
       [good] {
         auto z = archive_with(good);
         return patched(patched(z, z.size() - 98 + 24, 1ull << 40, 8), z.size() - 98 + 32, 1ull << 40, 8);
       },
       "claims"},
      {"zip64_record_offset_bad",
       [good] {
         auto z = archive_with(good);
         return patched(z, z.size() - 42 + 8, 1ull << 50, 8);
       },
       "ZIP64 end-of-central-directory offset"},
      {"compressed_entry",
       [good] {
         auto z = archive_with(good);
         return patched(z, central_header(z) + 10, 8, 2);
       },
       "is compressed (method 8)"},
      {"encrypted_entry",
       [good] {
         auto z = archive_with(good);
         return patched(z, central_header(z) + 8, 1, 2);
       },
       "is encrypted"},
      {"local_header_past_end",
       [good] {
         auto z = archive_with(good);
         return patched(z, central_header(z) + 42, 0x7fffffff, 4);
       },
       "past the end of the file"},
      {"entry_size_past_end",
       [good] {
         auto z = archive_with(good);
         return patched(patched(z, central_header(z) + 20, 0x7ffffff0, 4), central_header(z) + 24, 0x7ffffff0,
                        4);
       },
       "past the end of the"},
      {"pickle_crc_mismatch",
       [good] {
         auto z = archive_with(good);
         z[read_zip_directory(z, "m")[0].data_offset + 40] ^= 1;
         return z;
       },
       "fails its CRC-32 check"},
      {"missing_data_pkl",
       [] {
         ZipWriter z;
         z.add("archive/version", test::bytes_of("3\n"));
         return z.finish();
       },
       "no 'archive/data.pkl'"},
      {"missing_version",
       [good] {
         ZipWriter z;
         z.add("archive/data.pkl", test::bytes_of(good));
         return z.finish();
       },
       "no 'archive/version'"},
      {"entry_outside_folder",
       [good] {
         ZipWriter z;
         z.add("archive/data.pkl", test::bytes_of(good));
         z.add("other/version", test::bytes_of("3\n"));
         return z.finish();
       },
       "outside the archive folder 'archive/'"},
      {"entry_not_in_folder",
       [good] {
         ZipWriter z;
         z.add("data.pkl", test::bytes_of(good));
         return z.finish();
       },
       "is not inside a folder"},
      {"big_endian", [good] { return archive_with(good, "big"); }, "only little-endian"},
      {"empty_archive", [] { return ZipWriter().finish(); }, "the zip archive is empty"},
      // Tensors against their storages.
      {"wrong_storage_size", [with] { return with([](OneTensor& t) { t.numel = pickle_int1(5); }); },
       "declares 5 F32 elements but its record has 16 bytes"},
      {"tensor_past_storage", [with] { return with([](OneTensor& t) { t.offset = pickle_int1(1); }); },
       "run past the end of its 4-element storage"},
      {"negative_offset", [with] { return with([](OneTensor& t) { t.offset = int4(-1); }); },
       "run past the end"},
      {"non_contiguous",
       [with] {
         return with([](OneTensor& t) {
           t.size = pickle_int1(2) + pickle_int1(2) + "\x86";
           t.stride = pickle_int1(1) + pickle_int1(2) + "\x86";
         });
       },
       "strides (1, 2), which are not contiguous"},
      {"strides_rank_mismatch", [with] { return with([](OneTensor& t) { t.stride = std::string(")"); }); },
       "1 sizes but 0 strides"},
      {"negative_size", [with] { return with([](OneTensor& t) { t.size = int4(-4) + "\x85"; }); },
       "negative size -4"},
      {"negative_numel", [with] { return with([](OneTensor& t) { t.numel = int4(-1); }); }, "negative size"},
      {"huge_shape",
       [with] {
         return with([](OneTensor& t) {
           t.size = long1(1ull << 41, 6) + long1(1ull << 41, 6) + "\x86";
           t.stride = pickle_int1(1) + pickle_int1(1) + "\x86";
         });
       },
       "implausibly large shape"},
      {"huge_numel", [with] { return with([](OneTensor& t) { t.numel = long1(1ull << 62, 8); }); },
       "but its record has 16 bytes"},
      {"missing_storage", [with] { return with([](OneTensor& t) { t.key = std::string("7"); }); },
       "has no 'archive/data/7'"},
      {"unknown_storage_type",
       [with] { return with([](OneTensor& t) { t.storage_global = "ctorch\nQUInt8Storage\n"; }); },
       "refuses global 'torch.QUInt8Storage'"},
      // Globals and opcodes a state_dict never uses.
      {"global_os_system", [with] { return with([](OneTensor& t) { t.dict_global = "cos\nsystem\n"; }); },
       "refuses global 'os.system'"},
      {"global_posix_system", raw(kProto + "cposix\nsystem\n" + pickle_unicode("echo hi") + "\x85R."),
       "refuses global 'posix.system'"},
      {"stack_global_builtins_eval",
       raw(kProto + pickle_unicode("builtins") + pickle_unicode("eval") + "\x93" + pickle_unicode("1") +
           "\x85R."),
       "refuses global 'builtins.eval'"},
      {"global_without_newline", raw(kProto + "ccollections"), "no newline-terminated name"},
      {"opcode_inst", raw(kProto + "ios\nsystem\n."), "unsupported pickle opcode 0x69 ('i')"},
      {"opcode_newobj", raw(kProto + kOrderedDict + ")\x81."), "unsupported pickle opcode 0x81"},
      {"opcode_text_persid", raw(kProto + "P0\n."), "unsupported pickle opcode 0x50 ('P')"},
      {"opcode_ff", raw(kProto + "\xff"), "unsupported pickle opcode 0xff"},
      {"protocol_0", raw(std::string("\x80\x00", 2) + "}."), "pickle protocol 0 is not supported"},
      {"persistent_id_other_form",
       [with] { return with([](OneTensor& t) { t.pid_tag = pickle_unicode("module"); }); },
       "persistent id is not of the form"},
      {"reduce_storage_type", raw(kProto + "ctorch\nFloatStorage\n)R."), "calls torch.FloatStorage"},
      {"rebuild_with_wrong_arguments", raw(kProto + kRebuild + ")R."),
       "_rebuild_tensor_v2 is not called with"},
      {"ordered_dict_with_arguments", raw(kProto + kOrderedDict + "K\x01\x85R."), "called with arguments"},
      {"build_on_list", raw(kProto + "]}b."), "BUILD of a list"},
      // Structure.
      {"root_not_a_dict", raw(kProto + "K\x01."), "holds a int, not a dict of tensors"},
      {"value_not_a_tensor", raw(kProto + "}" + pickle_unicode("w") + "K\x01s."),
       "entry 'w' is a int, not a tensor"},
      {"duplicate_name",
       raw(kProto + "}(" + pickle_unicode("w") + kRebuild + "((" + pickle_unicode("storage") +
           "ctorch\nFloatStorage\n" + pickle_unicode("0") + pickle_unicode("cpu") + pickle_int1(4) + "tQ" +
           pickle_int1(0) + pickle_int1(4) + "\x85" + pickle_int1(1) + "\x85\x89}tR" + opcode('q', le(0, 1)) +
           pickle_unicode("w") + opcode('h', le(0, 1)) + "u."),
       "tensor 'w' appears twice"},
      {"no_stop", raw(kProto + "}"), "ends without a STOP opcode"},
      {"stack_underflow", raw(kProto + "s."), "stack underflow"},
      {"pop_below_mark", raw(kProto + "}(s."), "stack underflow"},
      {"setitems_without_mark", raw(kProto + "}u."), "needs a MARK"},
      {"append_to_dict",
       raw(kProto + "}K\x01"
                    "a."),
       "APPEND applied to a dict"},
      {"odd_setitems", raw(kProto + "}(K\x01u."), "a key without a value"},
      {"unset_memo", raw(kProto + "h\x05."), "memo entry 5, which was never stored"},
      {"huge_memo_index", raw(kProto + "}r\xff\xff\xff\xff."), "memo index 4294967295 is out of range"},
      {"huge_string", raw(kProto + "X\xff\xff\xff\xff" + "abc"), "runs past the end"},
      {"huge_string8", raw(kProto + "\x8d" + le(1ull << 63, 8) + "abc"), "runs past the end"},
      {"huge_frame", raw(kProto + "\x95" + le(1ull << 40, 8) + "}."), "FRAME of"},
      {"long_integer", raw(kProto + long1(1, 9) + "."), "does not fit in 64 bits"},
      {"truncated_opcode", raw(kProto + "J\x01"), "runs past the end"},
      {"list_cycle", raw(kProto + "]" + opcode('q', le(0, 1)) + opcode('h', le(0, 1)) + "a."),
       "holds a list"},
      {"dict_cycle",
       raw(kProto + "}" + opcode('q', le(0, 1)) + pickle_unicode("a") + opcode('h', le(0, 1)) + "s."),
       "entry 'a' is a dict, not a tensor"},
      {"million_marks", raw(kProto + std::string(1000000, '(') + "."), "nested MARKs"},
      {"million_lists", raw(kProto + std::string(1000000, ']') + "."), "holds a list"},
      {"two_million_lists", raw(kProto + std::string(2000000, ']') + "."), "builds more than"},
      {"million_nested_lists", raw(kProto + std::string(1000000, ']') + std::string(999999, 'a') + "."),
       "holds a list"},
  };
}

TEST(MalformedTorchCheckpoint, EveryDefectIsRefusedWithAMessage) {
  const auto list = torch_defects();
  ASSERT_GE(list.size(), 50u);
  for (const auto& defect : list) {
    SCOPED_TRACE(defect.name);
    const std::string path = write_temp(defect.file(), "bad_bin_" + defect.name);
    try {
      MappedFile file(path);
      read_torch_checkpoint(file);
      ADD_FAILURE() << defect.name << ": loaded without error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(defect.expected), std::string::npos)
          << defect.name << ": message was: " << message;
      EXPECT_NE(message.find(path), std::string::npos) << defect.name << ": message does not name the file";
    }
  }
}

TEST(MalformedTorchCheckpoint, TheUnmodifiedFileLoads) {
  const TensorSet set = TensorSet::open_file(write_temp(archive_with(one_tensor_pickle({})), "good_bin"));
  ASSERT_NE(set.find("w"), nullptr);
  EXPECT_EQ(set.find("w")->shape, std::vector<int64_t>{4});
}

// A real writer output cut at every length, and with every byte flipped: each is refused with
// an mb::Error or, where only tensor bytes changed, loads; none crashes.
std::vector<uint8_t> small_checkpoint() {
  TorchCheckpointWriter writer;
  writer.add_f32("a", {2, 3}, test::random_floats(6, 5), DType::F32);
  const size_t storage = writer.add_storage("BF16", std::vector<uint8_t>(16, 1));
  writer.add_view("b", storage, 2, {2, 3});
  writer.add_view("c", storage, 0, {});
  return writer.serialize("archive");
}

TEST(MalformedTorchCheckpoint, EveryTruncationIsRefused) {
  const std::vector<uint8_t> full = small_checkpoint();
  const std::string dir = test::make_temp_dir("bin_truncated");
  for (size_t length = 0; length < full.size(); ++length) {
    const std::string path = dir + "/cut.bin";
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(full.data()), static_cast<std::streamsize>(length));
    EXPECT_THROW(TensorSet::open_file(path), Error) << "cut at " << length;
  }
}

TEST(MalformedTorchCheckpoint, EveryFlippedByteIsRefusedOrHarmless) {
  const std::vector<uint8_t> full = small_checkpoint();
  const std::string dir = test::make_temp_dir("bin_flipped");
  size_t refused = 0;
  for (size_t pos = 0; pos < full.size(); ++pos) {
    std::vector<uint8_t> bytes = full;
    bytes[pos] ^= 0x5a;
    const std::string path = dir + "/flip.bin";
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    try {
      const TensorSet set = TensorSet::open_file(path);
      for (const auto& [name, tensor] : set.tensors()) EXPECT_LE(tensor.byte_size, bytes.size()) << name;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, full.size() / 4) << "most of the file is structure, so most flips must be caught";
}

TEST(MalformedTorchCheckpoint, ModelLoadNamesTheBinFile) {
  MakeModelOptions o;
  o.config = test::small_config(16, 2, 40);
  o.format = CheckpointFormat::TorchBin;
  const std::string dir = test::write_model(o, "bin_model_truncated");
  const std::string path = dir + "/pytorch_model.bin";
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  try {
    Model::load(dir);
    ADD_FAILURE() << "a truncated pytorch_model.bin loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(MalformedTorchCheckpoint, BinShardsAreRefusedByMakeModel) {
  MakeModelOptions o;
  o.config = test::small_config(16, 2, 40);
  o.format = CheckpointFormat::TorchBin;
  o.shards = 2;
  EXPECT_THROW(test::write_model(o, "bin_model_shards"), Error);
}

}  // namespace
}  // namespace mb
