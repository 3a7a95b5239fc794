// SPDX-License-Identifier: MIT
// PyTorch checkpoints: the writer's files read back bit for bit through TensorSet; a data.pkl
// assembled opcode by opcode the way torch.save emits it reads correctly; the zip layout is
// the one PyTorch's writer produces (64-byte aligned data, CRC-32s, ZIP64 end records).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "io/zip_archive.h"

namespace mb {
namespace {

namespace fs = std::filesystem;

template <typename T>
std::vector<uint8_t> raw_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<uint8_t> tensor_bytes(const StoredTensor& t) {
  return {t.data, t.data + t.byte_size};
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t le32(const uint8_t* p) {
  return le16(p) | (static_cast<uint32_t>(le16(p + 2)) << 16);
}

// Pickle fragments for the hand-assembled stream. (Joined with cat(): GCC 12 warns falsely
// about `"literal" + std::string`.)
std::string cat(std::initializer_list<std::string> parts) {
  std::string out;
  for (const std::string& part : parts) out += part;
  return out;
}
std::string le32_text(uint32_t value) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
  return out;
}
std::string unicode(const std::string& text) {
  return cat({"X", le32_text(text.size()), text});
}  // BINUNICODE
std::string put(int index) {
  return cat({"q", std::string(1, static_cast<char>(index))});
}  // BINPUT
std::string get(int index) {
  return cat({"h", std::string(1, static_cast<char>(index))});
}  // BINGET
std::string int1(int value) {
  return cat({"K", std::string(1, static_cast<char>(value))});
}  // BININT1

TEST(Crc32, MatchesTheStandardCheckValue) {
  const std::vector<uint8_t> text = test::bytes_of("123456789");
  EXPECT_EQ(crc32(text), 0xCBF43926u);
  EXPECT_EQ(crc32({}), 0u);
  // A running checksum over two pieces equals the checksum of the whole.
  EXPECT_EQ(crc32(std::span(text).subspan(4), crc32(std::span(text).first(4))), 0xCBF43926u);
}

TEST(TorchCheckpoint, RoundTripKeepsDtypesShapesAndBytes) {
  const std::string dir = test::make_temp_dir("torch_round_trip");
  const std::string path = dir + "/pytorch_model.bin";
  const std::vector<float> f32 = test::random_floats(24, 1);
  TorchCheckpointWriter writer;
  writer.add_f32("f32", {2, 3, 4}, f32, DType::F32);
  writer.add_f32("bf16", {4, 6}, f32, DType::BF16);
  writer.add_f32("f16", {24}, f32, DType::F16);
  writer.add("scalar", "F32", {}, raw_bytes(std::vector<float>{2.5f}));
  writer.add("ids", "I64", {3}, raw_bytes(std::vector<int64_t>{7, -1, 1ll << 40}));
  writer.add("four_d", "F32", {1, 2, 3, 4}, raw_bytes(f32));
  writer.add("empty", "F32", {0, 3}, {});
  // Tied weights: two tensors over one storage, the second 6 elements in.
  const size_t shared = writer.add_storage("BF16", encode_f32(f32, DType::BF16));
  writer.add_view("tied.a", shared, 0, {4, 6});
  writer.add_view("tied.b", shared, 6, {3, 6});
  writer.write(path);

  const TensorSet set = TensorSet::open_file(path);
  ASSERT_EQ(set.tensors().size(), 9u);
  const StoredTensor& t32 = *set.find("f32");
  EXPECT_EQ(t32.dtype_string, "F32");
  EXPECT_EQ(t32.dtype, DType::F32);
  EXPECT_EQ(t32.shape, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(tensor_bytes(t32), raw_bytes(f32));
  EXPECT_EQ(t32.file, path);
  EXPECT_EQ(set.find("bf16")->dtype, DType::BF16);
  EXPECT_EQ(tensor_bytes(*set.find("bf16")), encode_f32(f32, DType::BF16));
  EXPECT_EQ(set.find("f16")->dtype_string, "F16");
  EXPECT_EQ(tensor_bytes(*set.find("f16")), encode_f32(f32, DType::F16));
  EXPECT_EQ(set.find("scalar")->shape, std::vector<int64_t>{});
  EXPECT_EQ(set.find("scalar")->element_count(), 1);
  EXPECT_EQ(tensor_bytes(*set.find("scalar")), raw_bytes(std::vector<float>{2.5f}));
  EXPECT_EQ(set.find("ids")->dtype_string, "I64");
  EXPECT_FALSE(set.find("ids")->dtype.has_value());
  EXPECT_EQ(tensor_bytes(*set.find("ids")), raw_bytes(std::vector<int64_t>{7, -1, 1ll << 40}));
  EXPECT_EQ(set.find("four_d")->shape, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(set.find("empty")->byte_size, 0u);
  const StoredTensor& a = *set.find("tied.a");
  const StoredTensor& b = *set.find("tied.b");
  EXPECT_EQ(b.data, a.data + 6 * 2) << "views of one storage must share its bytes";
  EXPECT_EQ(b.shape, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(tensor_bytes(b), std::vector<uint8_t>(a.data + 12, a.data + 12 + 36));
}

TEST(TorchCheckpoint, ManyTensorsUseLongMemoIndicesAndSeveralBatches) {
  // Over 256 memo entries switch BINPUT/BINGET to their 4-byte forms; over 1000 items split
  // the dict into several SETITEMS batches, and a lone last item uses SETITEM.
  const std::string path = test::make_temp_dir("torch_many") + "/pytorch_model.bin";
  TorchCheckpointWriter writer;
  auto name = [](int i) { return cat({"t", std::to_string(i)}); };
  for (int i = 0; i < 1001; ++i)
    writer.add(name(i), i % 2 ? "F32" : "BF16", {1},
               i % 2 ? raw_bytes(std::vector<float>{float(i)}) : encode_f32({float(i)}, DType::BF16));
  writer.write(path);
  const TensorSet set = TensorSet::open_file(path);
  ASSERT_EQ(set.tensors().size(), 1001u);
  for (int i : {0, 1, 500, 999, 1000}) {
    const StoredTensor& t = *set.find(name(i));
    EXPECT_EQ(load_as_f32(t.data, *t.dtype, 0), float(i)) << i;
  }
}

// What torch.save(model.state_dict()) writes for a module with an embedding [4, 2] and an
// lm_head tied to it, as listed by pickletools.dis:
//     0: \x80 PROTO      2
//     2: c    GLOBAL     'collections OrderedDict'
//    27: q    BINPUT     0
//    29: )    EMPTY_TUPLE
//    30: R    REDUCE
//    31: q    BINPUT     1
//    33: (    MARK
//    34: X        BINUNICODE 'embedding.weight'
//    55: q        BINPUT     2
//    57: c        GLOBAL     'torch._utils _rebuild_tensor_v2'
//    90: q        BINPUT     3
//    92: (        MARK
//    93: (            MARK
//    94: X                BINUNICODE 'storage'
//   106: q                BINPUT     4
//   108: c                GLOBAL     'torch FloatStorage'
//   128: q                BINPUT     5
//   130: X                BINUNICODE '0'
//   136: q                BINPUT     6
//   138: X                BINUNICODE 'cpu'
//   146: q                BINPUT     7
//   148: K                BININT1    8
//   150: t                TUPLE      (MARK at 93)
//   151: q            BINPUT     8
//   153: Q            BINPERSID
//   154: K            BININT1    0
//   156: K            BININT1    4
//   158: K            BININT1    2
//   160: \x86         TUPLE2
//   161: q            BINPUT     9
//   163: K            BININT1    2
//   165: K            BININT1    1
//   167: \x86         TUPLE2
//   168: q            BINPUT     10
//   170: \x89         NEWFALSE
//   171: h            BINGET     0
//   173: )            EMPTY_TUPLE
//   174: R            REDUCE
//   175: q            BINPUT     11
//   177: t            TUPLE      (MARK at 92)
//   178: q        BINPUT     12
//   180: R        REDUCE
//   181: q        BINPUT     13
//   183: X        BINUNICODE 'lm_head.weight'
//   202: q        BINPUT     14
//   204: h        BINGET     3
//   206: (        MARK
//   207: (            MARK
//   208: h                BINGET     4
//   210: h                BINGET     5
//   212: h                BINGET     6
//   214: h                BINGET     7
//   216: K                BININT1    8
//   218: t                TUPLE      (MARK at 207)
//   219: q            BINPUT     15
//   221: Q            BINPERSID
//   222: K            BININT1    0
//   224: K            BININT1    4
//   226: K            BININT1    2
//   228: \x86         TUPLE2
//   229: q            BINPUT     16
//   231: K            BININT1    2
//   233: K            BININT1    1
//   235: \x86         TUPLE2
//   236: q            BINPUT     17
//   238: \x89         NEWFALSE
//   239: h            BINGET     0
//   241: )            EMPTY_TUPLE
//   242: R            REDUCE
//   243: q            BINPUT     18
//   245: t            TUPLE      (MARK at 206)
//   246: q        BINPUT     19
//   248: R        REDUCE
//   249: q        BINPUT     20
//   251: u        SETITEMS   (MARK at 33)
//   252: }    EMPTY_DICT
//   253: q    BINPUT     21
//   255: X    BINUNICODE '_metadata'
//   269: q    BINPUT     22
//   271: h    BINGET     0
//   273: )    EMPTY_TUPLE
//   274: R    REDUCE
//   275: q    BINPUT     23
//   277: (    MARK
//   278: X        BINUNICODE ''
//   283: q        BINPUT     24
//   285: }        EMPTY_DICT
//   286: q        BINPUT     25
//   288: X        BINUNICODE 'version'
//   300: q        BINPUT     26
//   302: K        BININT1    1
//   304: s        SETITEM
//   305: X        BINUNICODE 'embedding'
//   319: q        BINPUT     27
//   321: }        EMPTY_DICT
//   322: q        BINPUT     28
//   324: h        BINGET     26
//   326: K        BININT1    1
//   328: s        SETITEM
//   329: X        BINUNICODE 'lm_head'
//   341: q        BINPUT     29
//   343: }        EMPTY_DICT
//   344: q        BINPUT     30
//   346: h        BINGET     26
//   348: K        BININT1    1
//   350: s        SETITEM
//   351: u        SETITEMS   (MARK at 277)
//   352: s    SETITEM
//   353: b    BUILD
//   354: .    STOP
// The tied lm_head refers to the same storage key '0' (BINGET 6): torch.save stores the
// storage once. The trailing _metadata attribute (versions of each submodule) is ignored.
struct TorchSaveStream {
  std::string head, items, metadata;
};

TorchSaveStream torch_save_stream() {
  TorchSaveStream s;
  s.head = cat({std::string("\x80\x02", 2), "ccollections\nOrderedDict\n", put(0), ")R", put(1)});
  const std::string tensor_tail = cat({int1(0), int1(4), int1(2), "\x86"});  // offset, size (4, 2)
  s.items = cat({"(",
                 unicode("embedding.weight"),
                 put(2),
                 "ctorch._utils\n_rebuild_tensor_v2\n",
                 put(3),
                 "((",
                 unicode("storage"),
                 put(4),
                 "ctorch\nFloatStorage\n",
                 put(5),
                 unicode("0"),
                 put(6),
                 unicode("cpu"),
                 put(7),
                 int1(8),
                 "t",
                 put(8),
                 "Q",
                 tensor_tail,
                 put(9),
                 int1(2),
                 int1(1),
                 "\x86",
                 put(10),
                 "\x89",
                 get(0),
                 ")R",
                 put(11),
                 "t",
                 put(12),
                 "R",
                 put(13),
                 unicode("lm_head.weight"),
                 put(14),
                 get(3),
                 "((",
                 get(4),
                 get(5),
                 get(6),
                 get(7),
                 int1(8),
                 "t",
                 put(15),
                 "Q",
                 tensor_tail,
                 put(16),
                 int1(2),
                 int1(1),
                 "\x86",
                 put(17),
                 "\x89",
                 get(0),
                 ")R",
                 put(18),
                 "t",
                 put(19),
                 "R",
                 put(20),
                 "u"});
  s.metadata = cat({"}",
                    put(21),
                    unicode("_metadata"),
                    put(22),
                    get(0),
                    ")R",
                    put(23),
                    "(",
                    unicode(""),
                    put(24),
                    "}",
                    put(25),
                    unicode("version"),
                    put(26),
                    int1(1),
                    "s",
                    unicode("embedding"),
                    put(27),
                    "}",
                    put(28),
                    get(26),
                    int1(1),
                    "s",
                    unicode("lm_head"),
                    put(29),
                    "}",
                    put(30),
                    get(26),
                    int1(1),
                    "s",
                    "us",
                    "b"});
  return s;
}

// A torch.save archive in folder `archive/` holding `pickle` and one storage "0".
std::vector<uint8_t> archive_with(const std::string& pickle, const std::vector<uint8_t>& storage) {
  ZipWriter zip;
  zip.add("archive/data.pkl", test::bytes_of(pickle));
  zip.add("archive/byteorder", test::bytes_of("little"));
  zip.add("archive/data/0", storage);
  zip.add("archive/version", test::bytes_of("3\n"));
  return zip.finish();
}

TEST(TorchCheckpoint, ReadsTheStreamTorchSaveWrites) {
  const TorchSaveStream s = torch_save_stream();
  const std::string pickle = s.head + s.items + s.metadata + ".";
  ASSERT_EQ(pickle.size(), 355u) << "the listing above ends at byte 354";
  const std::vector<float> weights = test::random_floats(8, 3);
  const std::string path = test::make_temp_dir("torch_stream") + "/pytorch_model.bin";
  write_file(path, archive_with(pickle, raw_bytes(weights)));

  const TensorSet set = TensorSet::open_file(path);
  ASSERT_EQ(set.tensors().size(), 2u);
  for (const char* name : {"embedding.weight", "lm_head.weight"}) {
    const StoredTensor& t = *set.find(name);
    EXPECT_EQ(t.dtype, DType::F32) << name;
    EXPECT_EQ(t.shape, (std::vector<int64_t>{4, 2})) << name;
    EXPECT_EQ(tensor_bytes(t), raw_bytes(weights)) << name;
  }
  EXPECT_EQ(set.find("embedding.weight")->data, set.find("lm_head.weight")->data);
}

TEST(TorchCheckpoint, WriterEmitsTorchSaveOpcodes) {
  // The same two tied tensors through the writer give the same stream, minus the _metadata
  // attribute the writer leaves out (load_state_dict treats it as optional).
  TorchCheckpointWriter writer;
  const size_t storage = writer.add_storage("F32", raw_bytes(test::random_floats(8, 3)));
  writer.add_view("embedding.weight", storage, 0, {4, 2});
  writer.add_view("lm_head.weight", storage, 0, {4, 2});
  const std::vector<uint8_t> archive = writer.serialize("archive");
  const std::vector<ZipEntry> entries = read_zip_directory(archive, "memory");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].name, "archive/data.pkl");
  EXPECT_EQ(entries[1].name, "archive/byteorder");
  EXPECT_EQ(entries[2].name, "archive/data/0");
  EXPECT_EQ(entries[3].name, "archive/version");
  const std::string pickle(archive.begin() + entries[0].data_offset,
                           archive.begin() + entries[0].data_offset + entries[0].size);
  const TorchSaveStream s = torch_save_stream();
  EXPECT_EQ(pickle, s.head + s.items + ".");
}

TEST(TorchCheckpoint, ZipLayoutMatchesPyTorchsWriter) {
  TorchCheckpointWriter writer;
  writer.add_f32("w", {3, 5}, test::random_floats(15, 4), DType::F32);
  writer.add("empty", "F32", {0}, {});
  const std::vector<uint8_t> archive = writer.serialize("pytorch_model");
  const std::vector<ZipEntry> entries = read_zip_directory(archive, "memory");
  ASSERT_EQ(entries.size(), 5u);
  uint64_t previous_end = 0;
  for (const ZipEntry& entry : entries) {
    SCOPED_TRACE(entry.name);
    EXPECT_EQ(entry.name.rfind("pytorch_model/", 0), 0u);
    EXPECT_EQ(entry.data_offset % 64, 0u) << "data must be 64-byte aligned";
    EXPECT_GT(entry.data_offset, previous_end);
    previous_end = entry.data_offset + entry.size;
    EXPECT_EQ(entry.crc32, crc32(std::span(archive).subspan(entry.data_offset, entry.size)));
  }
  // The first local header as miniz writes it: version 0, UTF-8 name flag plus a data
  // descriptor, stored, zero time/date/CRC/sizes, then an "FB" extra field of 'Z' padding.
  const uint8_t* local = archive.data();
  EXPECT_EQ(le32(local), 0x04034b50u);
  EXPECT_EQ(le16(local + 4), 0);
  EXPECT_EQ(le16(local + 6), 0x0808);
  for (int offset : {8, 10, 12}) EXPECT_EQ(le16(local + offset), 0) << offset;
  for (int offset : {14, 18, 22}) EXPECT_EQ(le32(local + offset), 0u) << offset;
  const std::string name = "pytorch_model/data.pkl";
  EXPECT_EQ(le16(local + 26), name.size());
  EXPECT_EQ(le16(local + 28), 64 - 30 - name.size());
  EXPECT_EQ(std::string(local + 30 + name.size(), local + 32 + name.size()), "FB");
  EXPECT_EQ(le16(local + 32 + name.size()), 64 - 30 - name.size() - 4);
  EXPECT_EQ(local[64 - 1], 'Z');
  // The data descriptor after data.pkl: signature, CRC-32, 32-bit sizes.
  const uint8_t* descriptor = archive.data() + entries[0].data_offset + entries[0].size;
  EXPECT_EQ(le32(descriptor), 0x08074b50u);
  EXPECT_EQ(le32(descriptor + 4), entries[0].crc32);
  EXPECT_EQ(le32(descriptor + 8), entries[0].size);
  // The archive ends with a ZIP64 end record (56 bytes), its locator (20) and the end record (22).
  const uint8_t* end = archive.data() + archive.size();
  EXPECT_EQ(le32(end - 22), 0x06054b50u);
  EXPECT_EQ(le32(end - 42), 0x07064b50u);
  EXPECT_EQ(le32(end - 98), 0x06064b50u);
  EXPECT_EQ(le16(end - 22 + 10), 5);
}

TEST(TorchCheckpoint, ReadsZip64Records) {
  // An archive whose central directory stores the size and local-header offset only in a
  // ZIP64 extra field, as archives past 4 GiB must (the 2.7b checkpoint is 5.4 GB).
  const std::string name = "archive/data/0";
  const std::vector<uint8_t> data = test::bytes_of("0123456789");
  std::vector<uint8_t> zip;
  auto put = [&](uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) zip.push_back(i < 8 ? static_cast<uint8_t>(value >> (8 * i)) : 0);
  };
  put(0x04034b50, 4);
  put(0, 22);
  put(name.size(), 2);
  put(0, 2);
  zip.insert(zip.end(), name.begin(), name.end());
  const uint64_t data_offset = zip.size();
  zip.insert(zip.end(), data.begin(), data.end());
  const uint64_t directory_offset = zip.size();
  put(0x02014b50, 4);
  put(0, 12);
  put(crc32(data), 4);
  put(0xFFFFFFFF, 4);  // compressed size: in the extra field
  put(0xFFFFFFFF, 4);  // size: in the extra field
  put(name.size(), 2);
  put(28, 2);  // extra length
  put(0, 8);   // comment length, disk, internal and external attributes
  put(0, 2);
  put(0xFFFFFFFF, 4);  // local header offset: in the extra field
  zip.insert(zip.end(), name.begin(), name.end());
  put(0x0001, 2);
  put(24, 2);
  put(data.size(), 8);
  put(data.size(), 8);
  put(0, 8);
  const uint64_t directory_size = zip.size() - directory_offset;
  const uint64_t zip64_end = zip.size();
  put(0x06064b50, 4);
  put(44, 8);
  put(0x002D031E, 4);
  put(0, 8);
  put(1, 8);
  put(1, 8);
  put(directory_size, 8);
  put(directory_offset, 8);
  put(0x07064b50, 4);
  put(0, 4);
  put(zip64_end, 8);
  put(1, 4);
  put(0x06054b50, 4);
  put(0, 4);
  put(0xFFFF, 2);
  put(0xFFFF, 2);
  put(0xFFFFFFFF, 4);
  put(0xFFFFFFFF, 4);
  put(0, 2);
  const std::vector<ZipEntry> entries = read_zip_directory(zip, "zip64");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].name, name);
  EXPECT_EQ(entries[0].data_offset, data_offset);
  EXPECT_EQ(entries[0].size, data.size());
}

TEST(TorchCheckpoint, OpenDirFindsBinFilesAndPrefersSafetensors) {
  const std::string dir = test::make_temp_dir("torch_open_dir");
  TorchCheckpointWriter bin;
  bin.add_f32("w", {2}, {1.0f, 2.0f}, DType::F32);
  bin.write(dir + "/pytorch_model.bin");
  EXPECT_EQ(TensorSet::open_dir(dir).find("w")->file, dir + "/pytorch_model.bin");

  SafetensorsWriter safetensors;
  safetensors.add_f32("w", {2}, {1.0f, 2.0f}, DType::F32);
  safetensors.write(dir + "/model.safetensors");
  EXPECT_EQ(TensorSet::open_dir(dir).find("w")->file, dir + "/model.safetensors");

  fs::remove(dir + "/model.safetensors");
  fs::remove(dir + "/pytorch_model.bin");
  try {
    TensorSet::open_dir(dir);
    ADD_FAILURE() << "an empty folder opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pytorch_model.bin.index.json"), std::string::npos) << e.what();
  }
}

TEST(TorchCheckpoint, ShardedBinLoadsThroughItsIndex) {
  const std::string dir = test::make_temp_dir("torch_sharded");
  TorchCheckpointWriter first, second;
  first.add_f32("a", {2}, {1.0f, 2.0f}, DType::F32);
  second.add_f32("b", {1}, {3.0f}, DType::BF16);
  first.write(dir + "/pytorch_model-00001-of-00002.bin");
  second.write(dir + "/pytorch_model-00002-of-00002.bin");
  std::ofstream(dir + "/pytorch_model.bin.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "pytorch_model-00001-of-00002.bin",
                                             "b": "pytorch_model-00002-of-00002.bin"}})";
  const TensorSet set = TensorSet::open_dir(dir);
  ASSERT_EQ(set.tensors().size(), 2u);
  EXPECT_EQ(set.find("b")->dtype, DType::BF16);
  EXPECT_EQ(set.find("b")->file, dir + "/pytorch_model-00002-of-00002.bin");
}

TEST(TorchCheckpoint, WriteTorchCheckpointCopiesATensorSet) {
  const std::string dir = test::make_temp_dir("torch_convert");
  SafetensorsWriter safetensors;
  safetensors.add_f32("x", {2, 2}, {1, 2, 3, 4}, DType::BF16);
  safetensors.add_raw("steps", "I32", {1}, raw_bytes(std::vector<int32_t>{42}));
  safetensors.write(dir + "/model.safetensors");
  const TensorSet original = TensorSet::open_file(dir + "/model.safetensors");
  std::vector<StoredTensor> tensors;
  for (const auto& [name, tensor] : original.tensors()) tensors.push_back(tensor);
  write_torch_checkpoint(dir + "/pytorch_model.bin", tensors);
  const TensorSet copy = TensorSet::open_file(dir + "/pytorch_model.bin");
  ASSERT_EQ(copy.tensors().size(), 2u);
  for (const auto& [name, tensor] : original.tensors()) {
    const StoredTensor& other = *copy.find(name);
    EXPECT_EQ(other.dtype_string, tensor.dtype_string) << name;
    EXPECT_EQ(other.shape, tensor.shape) << name;
    EXPECT_EQ(tensor_bytes(other), tensor_bytes(tensor)) << name;
  }
}

}  // namespace
}  // namespace mb
