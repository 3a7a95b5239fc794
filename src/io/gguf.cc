// SPDX-License-Identifier: MIT
#include "io/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "core/error.h"

namespace mb {
namespace {

// Bytes of one scalar of a fixed-size value type; 0 for String and Array.
size_t scalar_bytes(GgufType type) {
  switch (type) {
    case GgufType::Uint8:
    case GgufType::Int8:
    case GgufType::Bool:
      return 1;
    case GgufType::Uint16:
    case GgufType::Int16:
      return 2;
    case GgufType::Uint32:
    case GgufType::Int32:
    case GgufType::Float32:
      return 4;
    case GgufType::Uint64:
    case GgufType::Int64:
    case GgufType::Float64:
      return 8;
    case GgufType::String:
    case GgufType::Array:
      return 0;
  }
  return 0;
}

bool is_known_type(uint32_t type) {
  return type <= static_cast<uint32_t>(GgufType::Float64);
}

bool is_integer_type(GgufType type) {
  return scalar_bytes(type) > 0 && type != GgufType::Float32 && type != GgufType::Float64;
}

bool is_float_type(GgufType type) {
  return type == GgufType::Float32 || type == GgufType::Float64;
}

// The range an integer type (or Bool) can hold, for values kept as int64 (u64 as its bits).
bool integer_fits(GgufType type, int64_t value) {
  switch (type) {
    case GgufType::Uint8:
      return value >= 0 && value <= 0xff;
    case GgufType::Int8:
      return value >= -128 && value <= 127;
    case GgufType::Uint16:
      return value >= 0 && value <= 0xffff;
    case GgufType::Int16:
      return value >= -32768 && value <= 32767;
    case GgufType::Uint32:
      return value >= 0 && value <= 0xffffffffll;
    case GgufType::Int32:
      return value >= INT32_MIN && value <= INT32_MAX;
    case GgufType::Bool:
      return value == 0 || value == 1;
    case GgufType::Uint64:
    case GgufType::Int64:
      return true;
    default:
      return false;
  }
}

// Every ggml type a file may use, with ggml's block sizes. Ids ggml has retired (4, 5, 31-33,
// 36-38) are left out, so files using them are refused as unknown.
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

// Reads little-endian fields, checking each against the bytes that remain.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  size_t position() const { return position_; }
  size_t remaining() const { return bytes_.size() - position_; }

  void need(size_t count, const std::string& what) const {
    if (count > remaining())
      throw Error("'" + path_ + "': " + what + " at byte " + std::to_string(position_) + " needs " +
                  std::to_string(count) + " bytes but the " + std::to_string(bytes_.size()) +
                  "-byte file ends " + std::to_string(remaining()) + " bytes later");
  }
  uint64_t unsigned_field(size_t width, const std::string& what) {
    need(width, what);
    uint64_t value = 0;
    for (size_t i = width; i-- > 0;) value = (value << 8) | bytes_[position_ + i];
    position_ += width;
    return value;
  }
  uint32_t u32(const std::string& what) { return static_cast<uint32_t>(unsigned_field(4, what)); }
  uint64_t u64(const std::string& what) { return unsigned_field(8, what); }
  std::string string(const std::string& what) {
    const uint64_t length = u64(what + " length");
    if (length > remaining())
      throw Error("'" + path_ + "': " + what + " has length " + std::to_string(length) +
                  ", past the end of the " + std::to_string(bytes_.size()) + "-byte file");
    std::string text(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return text;
  }
  // Refuses a count of items that could not fit in the remaining bytes at `min_item_bytes` each,
  // before anything is allocated for them.
  void check_count(uint64_t count, size_t min_item_bytes, const std::string& what) const {
    if (count > remaining() / min_item_bytes)
      throw Error("'" + path_ + "': " + what + " " + std::to_string(count) + " cannot fit in the " +
                  std::to_string(remaining()) + " bytes left of the file");
  }

 private:
  std::span<const uint8_t> bytes_;
  const std::string& path_;
  size_t position_ = 0;
};

int64_t sign_extend(uint64_t bits, size_t width) {
  if (width == 8) return static_cast<int64_t>(bits);
  const uint64_t sign = uint64_t{1} << (8 * width - 1);
  return static_cast<int64_t>((bits ^ sign) - sign);
}

bool is_signed(GgufType type) {
  return type == GgufType::Int8 || type == GgufType::Int16 || type == GgufType::Int32 ||
         type == GgufType::Int64;
}

void read_scalar(Cursor& in, GgufType type, GgufValue& value, const std::string& what,
                 const std::string& path) {
  if (type == GgufType::String) {
    value.strings.push_back(in.string(what));
    return;
  }
  const size_t width = scalar_bytes(type);
  const uint64_t bits = in.unsigned_field(width, what);
  if (type == GgufType::Float32) {
    float f;
    const uint32_t narrow = static_cast<uint32_t>(bits);
    std::memcpy(&f, &narrow, 4);
    value.floats.push_back(f);
  } else if (type == GgufType::Float64) {
    double d;
    std::memcpy(&d, &bits, 8);
    value.floats.push_back(d);
  } else if (type == GgufType::Bool) {
    if (bits > 1) throw Error("'" + path + "': " + what + " is a bool holding " + std::to_string(bits));
    value.integers.push_back(static_cast<int64_t>(bits));
  } else {
    value.integers.push_back(is_signed(type) ? sign_extend(bits, width) : static_cast<int64_t>(bits));
  }
}

GgufValue read_value(Cursor& in, uint32_t raw_type, const std::string& what, const std::string& path) {
  if (!is_known_type(raw_type))
    throw Error("'" + path + "': " + what + " has unknown value type " + std::to_string(raw_type));
  GgufValue value;
  value.type = static_cast<GgufType>(raw_type);
  if (value.type != GgufType::Array) {
    value.element_type = value.type;
    read_scalar(in, value.type, value, what, path);
    return value;
  }
  const uint32_t element_type = in.u32(what + " element type");
  if (!is_known_type(element_type))
    throw Error("'" + path + "': " + what + " is an array of unknown value type " +
                std::to_string(element_type));
  value.element_type = static_cast<GgufType>(element_type);
  if (value.element_type == GgufType::Array)
    throw Error("'" + path + "': " + what + " is an array of arrays, which is not supported");
  const uint64_t count = in.u64(what + " element count");
  // A string element takes at least its 8-byte length.
  const size_t min_bytes = value.element_type == GgufType::String ? 8 : scalar_bytes(value.element_type);
  in.check_count(count, min_bytes, what + " element count");
  if (value.element_type == GgufType::String)
    value.strings.reserve(count);
  else if (is_float_type(value.element_type))
    value.floats.reserve(count);
  else
    value.integers.reserve(count);
  for (uint64_t i = 0; i < count; ++i)
    read_scalar(in, value.element_type, value, what + "[" + std::to_string(i) + "]", path);
  return value;
}

void put(std::vector<uint8_t>& out, uint64_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

void put_string(std::vector<uint8_t>& out, const std::string& text) {
  put(out, text.size(), 8);
  out.insert(out.end(), text.begin(), text.end());
}

void put_scalar(std::vector<uint8_t>& out, GgufType type, const GgufValue& value, size_t index) {
  if (type == GgufType::String) {
    put_string(out, value.strings[index]);
  } else if (type == GgufType::Float32) {
    const float f = static_cast<float>(value.floats[index]);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put(out, bits, 4);
  } else if (type == GgufType::Float64) {
    uint64_t bits;
    std::memcpy(&bits, &value.floats[index], 8);
    put(out, bits, 8);
  } else {
    put(out, static_cast<uint64_t>(value.integers[index]), scalar_bytes(type));
  }
}

uint64_t align_up(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

std::string_view gguf_type_name(GgufType type) {
  static constexpr const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                          "bool", "string", "array", "u64", "i64", "f64"};
  const auto index = static_cast<uint32_t>(type);
  return index < std::size(names) ? names[index] : "unknown";
}

namespace {

GgufValue scalar(GgufType type) {
  GgufValue value;
  value.type = type;
  value.element_type = type;
  return value;
}

}  // namespace

GgufValue GgufValue::u32(uint32_t v) {
  GgufValue value = scalar(GgufType::Uint32);
  value.integers = {v};
  return value;
}

GgufValue GgufValue::i32(int32_t v) {
  GgufValue value = scalar(GgufType::Int32);
  value.integers = {v};
  return value;
}

GgufValue GgufValue::u64(uint64_t v) {
  GgufValue value = scalar(GgufType::Uint64);
  value.integers = {static_cast<int64_t>(v)};
  return value;
}

GgufValue GgufValue::f32(float v) {
  GgufValue value = scalar(GgufType::Float32);
  value.floats = {v};
  return value;
}

GgufValue GgufValue::boolean(bool v) {
  GgufValue value = scalar(GgufType::Bool);
  value.integers = {v ? 1 : 0};
  return value;
}

GgufValue GgufValue::string(std::string v) {
  GgufValue value = scalar(GgufType::String);
  value.strings = {std::move(v)};
  return value;
}

GgufValue GgufValue::string_array(std::vector<std::string> values) {
  GgufValue value;
  value.type = GgufType::Array;
  value.element_type = GgufType::String;
  value.strings = std::move(values);
  return value;
}

GgufValue GgufValue::integer_array(GgufType element_type, std::vector<int64_t> values) {
  GgufValue value;
  value.type = GgufType::Array;
  value.element_type = element_type;
  value.integers = std::move(values);
  return value;
}

GgufValue GgufValue::float_array(GgufType element_type, std::vector<double> values) {
  GgufValue value;
  value.type = GgufType::Array;
  value.element_type = element_type;
  value.floats = std::move(values);
  return value;
}

size_t GgufValue::size() const {
  return integers.size() + floats.size() + strings.size();
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& info : kGgmlTypes)
    if (info.id == id) return &info;
  return nullptr;
}

int64_t GgufTensorInfo::element_count() const {
  int64_t count = 1;
  for (int64_t extent : ne) count *= extent;
  return count;
}

std::string GgufTensorInfo::dims_string() const {
  std::string text = "{";
  for (size_t i = 0; i < ne.size(); ++i) text += (i ? ", " : "") + std::to_string(ne[i]);
  return text + "}";
}

size_t ggml_tensor_bytes(uint32_t type, std::span<const int64_t> ne, const std::string& where) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (info == nullptr) throw Error(where + " has unknown ggml type " + std::to_string(type));
  // 2^40 per dim and 2^50 elements are far beyond any model and keep every product below 2^63.
  uint64_t elements = 1;
  for (int64_t extent : ne) {
    if (extent < 0 || extent > (int64_t{1} << 40) ||
        (extent != 0 && elements > (uint64_t{1} << 50) / static_cast<uint64_t>(extent)))
      throw Error(where + " has implausible dims");
    elements *= static_cast<uint64_t>(extent);
  }
  const int64_t row = ne.empty() ? 1 : ne[0];
  if (row % info->block_weights != 0)
    throw Error(where + ": row length ne[0] = " + std::to_string(row) + " is not a multiple of the " +
                info->name + " block of " + std::to_string(info->block_weights) + " weights");
  return static_cast<size_t>(elements / info->block_weights * info->block_bytes);
}

bool looks_like_gguf(std::span<const uint8_t> bytes) {
  return bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0;
}

GgufFile::GgufFile(const std::string& path) : GgufFile(std::make_shared<const MappedFile>(path), path) {}

GgufFile::GgufFile(std::shared_ptr<const MappedFile> owner, const std::string& path)
    : file_(std::move(owner)), path_(path) {
  parse(file_->bytes());
}

void GgufFile::parse(std::span<const uint8_t> bytes) {
  const std::string file = "'" + path_ + "'";
  if (!looks_like_gguf(bytes)) throw Error(file + " is not a GGUF file (it does not start with \"GGUF\")");
  Cursor in(bytes, path_);
  in.unsigned_field(4, "magic");
  version_ = in.u32("version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3)
      throw Error(file + " is a big-endian GGUF file, which is not supported");
    throw Error(file + " has GGUF version " + std::to_string(version_) +
                " (only versions 2 and 3 are supported)");
  }
  const uint64_t tensor_count = in.u64("tensor count");
  const uint64_t metadata_count = in.u64("metadata count");
  // A key/value pair takes at least an 8-byte key length, a 4-byte type and a 1-byte value.
  in.check_count(metadata_count, 13, "metadata count");
  std::set<std::string, std::less<>> keys;
  metadata_.reserve(metadata_count);
  for (uint64_t i = 0; i < metadata_count; ++i) {
    std::string key = in.string("metadata key #" + std::to_string(i));
    if (!keys.insert(key).second) throw Error(file + ": metadata key '" + key + "' appears twice");
    const uint32_t type = in.u32("the type of metadata '" + key + "'");
    GgufValue value = read_value(in, type, "metadata '" + key + "'", path_);
    metadata_.emplace_back(std::move(key), std::move(value));
  }
  if (const GgufValue* alignment = find("general.alignment")) {
    if (alignment->type != GgufType::Uint32)
      throw Error(file + ": general.alignment must be a u32, got " +
                  std::string(gguf_type_name(alignment->type)));
    const int64_t a = alignment->integers[0];
    if (a == 0 || (a & (a - 1)) != 0)
      throw Error(file + ": general.alignment " + std::to_string(a) + " is not a power of two");
    alignment_ = static_cast<uint32_t>(a);
  }

  // A tensor info takes at least an 8-byte name length, n_dims, a type and an offset.
  in.check_count(tensor_count, 24, "tensor count");
  std::set<std::string, std::less<>> names;
  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo tensor;
    tensor.name = in.string("the name of tensor #" + std::to_string(i));
    const std::string where = file + ": tensor '" + tensor.name + "'";
    if (tensor.name.size() > kGgufMaxNameBytes)
      throw Error(where + " has a name longer than " + std::to_string(kGgufMaxNameBytes) + " bytes");
    if (!names.insert(tensor.name).second) throw Error(file + ": tensor '" + tensor.name + "' appears twice");
    const uint32_t n_dims = in.u32(where + " dim count");
    if (n_dims > kGgufMaxDims)
      throw Error(where + " has " + std::to_string(n_dims) + " dims (at most " +
                  std::to_string(kGgufMaxDims) + ")");
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t extent = in.u64(where + " dim");
      if (extent > static_cast<uint64_t>(INT64_MAX)) throw Error(where + " has a negative dim");
      tensor.ne.push_back(static_cast<int64_t>(extent));
    }
    tensor.type = in.u32(where + " type");
    tensor.offset = in.u64(where + " offset");
    tensor.byte_size = ggml_tensor_bytes(tensor.type, tensor.ne, where);
    tensors_.push_back(std::move(tensor));
  }

  const uint64_t data_start = align_up(in.position(), alignment_);
  const uint64_t data_size = data_start < bytes.size() ? bytes.size() - data_start : 0;
  const uint8_t* data = bytes.data() + std::min<uint64_t>(data_start, bytes.size());
  struct Span {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  for (GgufTensorInfo& tensor : tensors_) {
    const std::string where = file + ": tensor '" + tensor.name + "'";
    if (tensor.offset % alignment_ != 0)
      throw Error(where + " has offset " + std::to_string(tensor.offset) +
                  ", not a multiple of the alignment " + std::to_string(alignment_));
    if (tensor.offset > data_size || tensor.byte_size > data_size - tensor.offset)
      throw Error(where + " (" + ggml_type_info(tensor.type)->name + " " + tensor.dims_string() + ", " +
                  std::to_string(tensor.byte_size) + " bytes at offset " + std::to_string(tensor.offset) +
                  ") runs past the end of the " + std::to_string(data_size) + "-byte data section");
    tensor.data = data + tensor.offset;
    // An empty tensor occupies no bytes, so it overlaps nothing.
    if (tensor.byte_size > 0)
      spans.push_back({tensor.offset, tensor.offset + tensor.byte_size, &tensor.name});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end)
      throw Error(file + ": tensors '" + *spans[i - 1].name + "' and '" + *spans[i].name + "' overlap");
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [name, value] : metadata_)
    if (name == key) return &value;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& tensor : tensors_)
    if (tensor.name == name) return &tensor;
  return nullptr;
}

std::optional<uint64_t> GgufFile::unsigned_if_present(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->is_array() || !is_integer_type(value->type) || value->type == GgufType::Bool ||
      (value->integers[0] < 0 && value->type != GgufType::Uint64))
    throw Error("'" + path_ + "': metadata '" + std::string(key) + "' must be a non-negative integer, got " +
                std::string(gguf_type_name(value->type)));
  return static_cast<uint64_t>(value->integers[0]);
}

uint64_t GgufFile::unsigned_value(std::string_view key) const {
  const auto value = unsigned_if_present(key);
  if (!value) throw Error("'" + path_ + "': missing required metadata '" + std::string(key) + "'");
  return *value;
}

double GgufFile::float_value(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) throw Error("'" + path_ + "': missing required metadata '" + std::string(key) + "'");
  if (value->is_array() || !is_float_type(value->type))
    throw Error("'" + path_ + "': metadata '" + std::string(key) + "' must be an f32 or f64, got " +
                std::string(gguf_type_name(value->type)));
  return value->floats[0];
}

std::optional<bool> GgufFile::bool_if_present(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != GgufType::Bool)
    throw Error("'" + path_ + "': metadata '" + std::string(key) + "' must be a bool, got " +
                std::string(gguf_type_name(value->type)));
  return value->integers[0] != 0;
}

std::optional<std::string> GgufFile::string_if_present(std::string_view key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  if (value->type != GgufType::String)
    throw Error("'" + path_ + "': metadata '" + std::string(key) + "' must be a string, got " +
                std::string(gguf_type_name(value->type)));
  return value->strings[0];
}

std::string GgufFile::string_value(std::string_view key) const {
  auto value = string_if_present(key);
  if (!value) throw Error("'" + path_ + "': missing required metadata '" + std::string(key) + "'");
  return *value;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw Error("GGUF alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != kGgufDefaultAlignment)
    metadata_.emplace_back("general.alignment", GgufValue::u32(alignment));
}

void GgufWriter::set(const std::string& key, GgufValue value) {
  if (key.empty()) throw Error("GGUF metadata keys must not be empty");
  if (key == "general.alignment") throw Error("GGUF general.alignment is set by the writer's constructor");
  const std::string where = "GGUF metadata '" + key + "'";
  const GgufType element = value.element_type;
  if (!is_known_type(static_cast<uint32_t>(element)) || element == GgufType::Array ||
      (value.type != GgufType::Array && value.type != element))
    throw Error(where + " has inconsistent types");
  const size_t expected = value.is_array() ? value.size() : 1;
  const size_t held = element == GgufType::String ? value.strings.size()
                      : is_float_type(element)    ? value.floats.size()
                                                  : value.integers.size();
  if (held != expected || value.size() != expected) throw Error(where + " holds values of the wrong kind");
  for (int64_t v : value.integers)
    if (!integer_fits(element, v)) throw Error(where + ": " + std::to_string(v) + " does not fit its type");
  for (auto& [name, old] : metadata_) {
    if (name == key) {
      old = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type,
                            std::vector<uint8_t> bytes) {
  const std::string where = "GGUF tensor '" + name + "'";
  if (name.empty() || name.size() > kGgufMaxNameBytes)
    throw Error(where + ": names must have 1 to " + std::to_string(kGgufMaxNameBytes) + " bytes");
  if (ne.size() > kGgufMaxDims)
    throw Error(where + " has more than " + std::to_string(kGgufMaxDims) + " dims");
  for (const Tensor& tensor : tensors_)
    if (tensor.name == name) throw Error(where + " is added twice");
  const size_t expected = ggml_tensor_bytes(type, ne, where);
  if (bytes.size() != expected)
    throw Error(where + " needs " + std::to_string(expected) + " bytes, got " + std::to_string(bytes.size()));
  tensors_.push_back({name, std::move(ne), type, std::move(bytes)});
}

std::vector<uint8_t> GgufWriter::serialize() const {
  std::vector<uint8_t> out;
  for (char ch : std::string_view("GGUF")) out.push_back(static_cast<uint8_t>(ch));
  put(out, 3, 4);
  put(out, tensors_.size(), 8);
  put(out, metadata_.size(), 8);
  for (const auto& [key, value] : metadata_) {
    put_string(out, key);
    put(out, static_cast<uint32_t>(value.type), 4);
    if (value.is_array()) {
      put(out, static_cast<uint32_t>(value.element_type), 4);
      put(out, value.size(), 8);
    }
    for (size_t i = 0; i < value.size(); ++i) put_scalar(out, value.element_type, value, i);
  }
  uint64_t offset = 0;
  for (const Tensor& tensor : tensors_) {
    put_string(out, tensor.name);
    put(out, tensor.ne.size(), 4);
    for (int64_t extent : tensor.ne) put(out, static_cast<uint64_t>(extent), 8);
    put(out, tensor.type, 4);
    put(out, offset, 8);
    offset += align_up(tensor.bytes.size(), alignment_);
  }
  out.resize(align_up(out.size(), alignment_), 0);
  for (const Tensor& tensor : tensors_) {
    out.insert(out.end(), tensor.bytes.begin(), tensor.bytes.end());
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  write_file_atomically(path, serialize());
}

}  // namespace mb
