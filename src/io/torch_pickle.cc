// SPDX-License-Identifier: MIT
#include "io/torch_pickle.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/error.h"

namespace mb {
namespace {

const StorageType kStorageTypes[] = {
    {"FloatStorage", "F32", 4, DType::F32},   {"BFloat16Storage", "BF16", 2, DType::BF16},
    {"HalfStorage", "F16", 2, DType::F16},    {"DoubleStorage", "F64", 8, std::nullopt},
    {"LongStorage", "I64", 8, std::nullopt},  {"IntStorage", "I32", 4, std::nullopt},
    {"ShortStorage", "I16", 2, std::nullopt}, {"CharStorage", "I8", 1, std::nullopt},
    {"ByteStorage", "U8", 1, std::nullopt},   {"BoolStorage", "BOOL", 1, std::nullopt},
};

// Bounds on what one pickle may build. A real state_dict needs about 20 objects per tensor.
constexpr size_t kMaxValues = size_t{1} << 20;
constexpr size_t kMaxStack = size_t{1} << 20;
constexpr size_t kMaxMarks = size_t{1} << 16;
constexpr uint64_t kMaxMemoIndex = uint64_t{1} << 20;
constexpr size_t kMaxGlobalName = 256;
constexpr uint32_t kUnset = UINT32_MAX;

enum class Kind : uint8_t { None, Bool, Int, Float, String, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "string";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "class or function";
    case Kind::Storage:
      return "storage";
    case Kind::Tensor:
      return "tensor";
  }
  return "?";
}

// Globals other than storage types; storage types are their index in kStorageTypes.
constexpr int64_t kOrderedDict = -1;
constexpr int64_t kRebuildTensor = -2;
constexpr int64_t kRebuildParameter = -3;

// One unpickled object. Containers hold indices into the machine's value table, so shared and
// even cyclic references (through the memo) are plain indices and nothing is ever recursed.
struct Value {
  Kind kind = Kind::None;
  int64_t number = 0;           // Bool, Int; Global: which; Storage, Tensor: index into their tables
  std::string text;             // String
  std::vector<uint32_t> items;  // Tuple, List; Dict: key, value, key, value, ...
};

class Machine {
 public:
  Machine(std::span<const uint8_t> code, const std::string& where) : code_(code), where_(where) {}

  PickledStateDict run() {
    while (true) {
      if (pos_ >= code_.size()) fail("ends without a STOP opcode");
      op_at_ = pos_;
      const uint8_t op = code_[pos_++];
      switch (op) {
        case 0x80: {  // PROTO
          const uint64_t protocol = read_le(1);
          if (protocol < 2 || protocol > 5)
            fail("pickle protocol " + std::to_string(protocol) + " is not supported (2 to 5 are)");
          break;
        }
        case 0x95: {  // FRAME: a length hint for buffered reading, irrelevant on a mapping
          const uint64_t length = read_le(8);
          if (length > code_.size() - pos_)
            fail("FRAME of " + std::to_string(length) + " bytes runs past the end");
          break;
        }
        case '}':
          push(make(Kind::Dict));
          break;  // EMPTY_DICT
        case ']':
          push(make(Kind::List));
          break;  // EMPTY_LIST
        case ')':
          push(make(Kind::Tuple));
          break;   // EMPTY_TUPLE
        case '(':  // MARK
          if (marks_.size() >= kMaxMarks)
            fail("opens more than " + std::to_string(kMaxMarks) + " nested MARKs");
          marks_.push_back(stack_.size());
          break;
        case 't':
          push_container(Kind::Tuple, pop_mark());
          break;  // TUPLE
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
          std::vector<uint32_t> items(op - 0x84);
          for (size_t i = items.size(); i-- > 0;) items[i] = pop();
          push_container(Kind::Tuple, std::move(items));
          break;
        }
        case 'X':
          push_string(read_le(4));
          break;  // BINUNICODE
        case 0x8c:
          push_string(read_le(1));
          break;  // SHORT_BINUNICODE
        case 0x8d:
          push_string(read_le(8));
          break;  // BINUNICODE8
        case 'q':
          memo_put(read_le(1));
          break;  // BINPUT
        case 'r':
          memo_put(read_le(4));
          break;  // LONG_BINPUT
        case 0x94:
          memo_put(memo_count_);
          break;  // MEMOIZE
        case 'h':
          memo_get(read_le(1));
          break;  // BINGET
        case 'j':
          memo_get(read_le(4));
          break;     // LONG_BINGET
        case 'c': {  // GLOBAL
          const std::string module = read_line();
          const std::string name = read_line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const uint32_t name = pop();
          const uint32_t module = pop();
          push(global(as_string(module, "STACK_GLOBAL module"), as_string(name, "STACK_GLOBAL name")));
          break;
        }
        case 'J':
          push_int(static_cast<int32_t>(static_cast<uint32_t>(read_le(4))));
          break;  // BININT
        case 'K':
          push_int(static_cast<int64_t>(read_le(1)));
          break;  // BININT1
        case 'M':
          push_int(static_cast<int64_t>(read_le(2)));
          break;      // BININT2
        case 0x8a: {  // LONG1
          const uint64_t length = read_le(1);
          if (length > 8)
            fail("LONG1 integer of " + std::to_string(length) + " bytes does not fit in 64 bits");
          uint64_t bits = length == 0 ? 0 : read_le(length);
          if (length > 0 && length < 8 && (bits >> (8 * length - 1)) & 1)
            bits |= ~uint64_t{0} << (8 * length);
          push_int(std::bit_cast<int64_t>(bits));
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          if (code_.size() - pos_ < 8) fail("BINFLOAT runs past the end");
          pos_ += 8;
          push(make(Kind::Float));
          break;
        }
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          const uint32_t value = make(Kind::Bool);
          values_[value].number = op == 0x88;
          push(value);
          break;
        }
        case 'N':
          push(make(Kind::None));
          break;  // NONE
        case 'Q':
          push(persistent_load(pop()));
          break;     // BINPERSID
        case 'R': {  // REDUCE
          const uint32_t args = pop();
          const uint32_t callable = pop();
          push(reduce(callable, args));
          break;
        }
        case 'b': {  // BUILD: only the state_dict's `_metadata` attribute, which is ignored
          const uint32_t state = pop();
          const Value& target = values_[top()];
          const Kind state_kind = values_[state].kind;
          if (target.kind != Kind::Dict || (state_kind != Kind::Dict && state_kind != Kind::None))
            fail(std::string("BUILD of a ") + kind_name(target.kind) + " from a " + kind_name(state_kind) +
                 " is not supported (only a dict's attribute dict, such as a state_dict's _metadata)");
          break;
        }
        case 's': {  // SETITEM
          const uint32_t value = pop();
          const uint32_t key = pop();
          std::vector<uint32_t>& items = container(top(), Kind::Dict, "SETITEM");
          items.push_back(key);
          items.push_back(value);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<uint32_t> pairs = pop_mark();
          if (pairs.size() % 2 != 0) fail("SETITEMS has a key without a value");
          std::vector<uint32_t>& items = container(top(), Kind::Dict, "SETITEMS");
          items.insert(items.end(), pairs.begin(), pairs.end());
          break;
        }
        case 'a': {  // APPEND
          const uint32_t value = pop();
          container(top(), Kind::List, "APPEND").push_back(value);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<uint32_t> values = pop_mark();
          std::vector<uint32_t>& items = container(top(), Kind::List, "APPENDS");
          items.insert(items.end(), values.begin(), values.end());
          break;
        }
        case '.':
          return finish(pop());  // STOP
        default: {
          char code[8];
          std::snprintf(code, sizeof code, "0x%02x", op);
          const std::string shown = op >= 0x20 && op < 0x7f ? std::string(" ('") + char(op) + "')" : "";
          fail("unsupported pickle opcode " + std::string(code) + shown + " at byte " +
               std::to_string(op_at_));
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error(where_ + ": " + what); }

  uint64_t read_le(uint64_t count) {
    if (count > code_.size() - pos_) fail("opcode at byte " + std::to_string(op_at_) + " runs past the end");
    uint64_t value = 0;
    for (uint64_t i = 0; i < count; ++i) value |= static_cast<uint64_t>(code_[pos_ + i]) << (8 * i);
    pos_ += count;
    return value;
  }

  std::string read_line() {
    const size_t limit = std::min<size_t>(code_.size() - pos_, kMaxGlobalName + 1);
    const auto* begin = code_.data() + pos_;
    const auto* newline = static_cast<const uint8_t*>(std::memchr(begin, '\n', limit));
    if (newline == nullptr)
      fail("GLOBAL at byte " + std::to_string(op_at_) + " has no newline-terminated name");
    pos_ += newline - begin + 1;
    return std::string(reinterpret_cast<const char*>(begin), newline - begin);
  }

  uint32_t make(Kind kind) {
    if (values_.size() >= kMaxValues) fail("builds more than " + std::to_string(kMaxValues) + " objects");
    values_.push_back({kind, 0, {}, {}});
    return static_cast<uint32_t>(values_.size() - 1);
  }

  void push(uint32_t value) {
    if (stack_.size() >= kMaxStack) fail("grows its stack past " + std::to_string(kMaxStack) + " entries");
    stack_.push_back(value);
  }

  size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }

  uint32_t top() {
    if (stack_.size() <= fence()) fail("stack underflow at byte " + std::to_string(op_at_));
    return stack_.back();
  }

  uint32_t pop() {
    const uint32_t value = top();
    stack_.pop_back();
    return value;
  }

  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("opcode at byte " + std::to_string(op_at_) + " needs a MARK but none is open");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }

  void push_container(Kind kind, std::vector<uint32_t> items) {
    const uint32_t value = make(kind);
    values_[value].items = std::move(items);
    push(value);
  }

  std::vector<uint32_t>& container(uint32_t value, Kind kind, const char* opcode) {
    if (values_[value].kind != kind)
      fail(std::string(opcode) + " applied to a " + kind_name(values_[value].kind) + " instead of a " +
           kind_name(kind));
    return values_[value].items;
  }

  void push_string(uint64_t length) {
    if (length > code_.size() - pos_)
      fail("string of " + std::to_string(length) + " bytes at byte " + std::to_string(op_at_) +
           " runs past the end");
    const uint32_t value = make(Kind::String);
    values_[value].text.assign(reinterpret_cast<const char*>(code_.data() + pos_), length);
    pos_ += length;
    push(value);
  }

  void push_int(int64_t number) {
    const uint32_t value = make(Kind::Int);
    values_[value].number = number;
    push(value);
  }

  void memo_put(uint64_t index) {
    if (index >= kMaxMemoIndex) fail("memo index " + std::to_string(index) + " is out of range");
    const uint32_t value = top();
    if (index >= memo_.size()) memo_.resize(index + 1, kUnset);
    if (memo_[index] == kUnset) ++memo_count_;
    memo_[index] = value;
  }

  void memo_get(uint64_t index) {
    if (index >= memo_.size() || memo_[index] == kUnset)
      fail("reads memo entry " + std::to_string(index) + ", which was never stored");
    push(memo_[index]);
  }

  const std::string& as_string(uint32_t value, const char* what) const {
    if (values_[value].kind != Kind::String)
      fail(std::string(what) + " is a " + kind_name(values_[value].kind) + ", not a string");
    return values_[value].text;
  }

  int64_t as_int(uint32_t value, const char* what) const {
    if (values_[value].kind != Kind::Int)
      fail(std::string(what) + " is a " + kind_name(values_[value].kind) + ", not an int");
    return values_[value].number;
  }

  std::vector<int64_t> as_int_tuple(uint32_t value, const char* what) const {
    if (values_[value].kind != Kind::Tuple)
      fail(std::string(what) + " is a " + kind_name(values_[value].kind) + ", not a tuple");
    std::vector<int64_t> numbers;
    for (uint32_t item : values_[value].items) numbers.push_back(as_int(item, what));
    return numbers;
  }

  uint32_t global(const std::string& module, const std::string& name) {
    int64_t which = 0;
    if (module == "collections" && name == "OrderedDict") {
      which = kOrderedDict;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      which = kRebuildTensor;
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      which = kRebuildParameter;
    } else {
      const StorageType* found = nullptr;
      if (module == "torch")
        for (const StorageType& type : kStorageTypes)
          if (name == type.torch_name) found = &type;
      if (found == nullptr)
        fail("refuses global '" + printable(module + "." + name) +
             "': a checkpoint may only name collections.OrderedDict, torch._utils._rebuild_tensor_v2, "
             "torch._utils._rebuild_parameter and torch.*Storage types");
      which = found - kStorageTypes;
    }
    const uint32_t value = make(Kind::Global);
    values_[value].number = which;
    return value;
  }

  // torch.save's persistent ids: ('storage', torch.<Type>Storage, key, location, numel).
  uint32_t persistent_load(uint32_t pid) {
    const Value& id = values_[pid];
    const bool shaped = id.kind == Kind::Tuple && id.items.size() == 5 &&
                        values_[id.items[0]].kind == Kind::String && values_[id.items[0]].text == "storage" &&
                        values_[id.items[1]].kind == Kind::Global && values_[id.items[1]].number >= 0;
    if (!shaped)
      fail("persistent id is not of the form ('storage', torch.<Type>Storage, key, location, numel)");
    PickledStorage storage;
    storage.type = static_cast<size_t>(values_[id.items[1]].number);
    storage.key = as_string(id.items[2], "storage key");
    storage.location = as_string(id.items[3], "storage location");
    storage.numel = as_int(id.items[4], "storage size");
    if (storage.numel < 0) fail("storage '" + printable(storage.key) + "' has a negative size");
    result_.storages.push_back(std::move(storage));
    const uint32_t value = make(Kind::Storage);
    values_[value].number = static_cast<int64_t>(result_.storages.size() - 1);
    return value;
  }

  uint32_t reduce(uint32_t callable, uint32_t args_value) {
    if (values_[callable].kind != Kind::Global)
      fail(std::string("REDUCE calls a ") + kind_name(values_[callable].kind) + ", not a class or function");
    if (values_[args_value].kind != Kind::Tuple) fail("REDUCE arguments are not a tuple");
    const std::vector<uint32_t> args = values_[args_value].items;
    const int64_t which = values_[callable].number;
    auto kind_of = [&](size_t i) { return values_[args[i]].kind; };
    if (which == kOrderedDict) {
      if (!args.empty()) fail("collections.OrderedDict is called with arguments");
      return make(Kind::Dict);
    }
    if (which == kRebuildTensor) {
      const bool shaped = (args.size() == 6 || args.size() == 7) && kind_of(0) == Kind::Storage &&
                          kind_of(4) == Kind::Bool && kind_of(5) == Kind::Dict &&
                          (args.size() == 6 || kind_of(6) == Kind::Dict);
      if (!shaped)
        fail(
            "torch._utils._rebuild_tensor_v2 is not called with (storage, storage_offset, size, stride, "
            "requires_grad, backward_hooks[, metadata])");
      PickledTensor tensor;
      tensor.storage = static_cast<size_t>(values_[args[0]].number);
      tensor.offset = as_int(args[1], "storage_offset");
      tensor.sizes = as_int_tuple(args[2], "tensor size");
      tensor.strides = as_int_tuple(args[3], "tensor stride");
      tensors_.push_back(std::move(tensor));
      const uint32_t value = make(Kind::Tensor);
      values_[value].number = static_cast<int64_t>(tensors_.size() - 1);
      return value;
    }
    if (which == kRebuildParameter) {
      if (args.size() != 3 || kind_of(0) != Kind::Tensor)
        fail("torch._utils._rebuild_parameter is not called with (tensor, requires_grad, backward_hooks)");
      return args[0];
    }
    fail(std::string("calls torch.") + kStorageTypes[which].torch_name + ", which a state_dict never does");
  }

  PickledStateDict finish(uint32_t root) {
    const Value& dict = values_[root];
    if (dict.kind != Kind::Dict)
      fail(std::string("holds a ") + kind_name(dict.kind) + ", not a dict of tensors");
    for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
      const std::string& name = as_string(dict.items[i], "a state_dict key");
      const Value& value = values_[dict.items[i + 1]];
      if (value.kind != Kind::Tensor)
        fail("entry '" + printable(name) + "' is a " + kind_name(value.kind) + ", not a tensor");
      PickledTensor tensor = tensors_[static_cast<size_t>(value.number)];
      tensor.name = name;
      result_.tensors.push_back(std::move(tensor));
    }
    return std::move(result_);
  }

  std::span<const uint8_t> code_;
  std::string where_;
  size_t pos_ = 0;
  size_t op_at_ = 0;  // byte offset of the opcode being run, for messages
  std::vector<Value> values_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;   // stack heights at each open MARK
  std::vector<uint32_t> memo_;  // memo index -> value, kUnset where never stored
  uint64_t memo_count_ = 0;     // distinct memo entries, which MEMOIZE numbers from
  std::vector<PickledTensor> tensors_;
  PickledStateDict result_;
};

// Emits pickle opcodes the way CPython's pickler does for protocol 2.
class PickleWriter {
 public:
  std::vector<uint8_t> out;

  void op(uint8_t code) { out.push_back(code); }
  void le(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }

  uint32_t memoize() {
    const uint32_t index = next_memo_++;
    if (index < 256) {
      op('q');
      le(index, 1);
    } else {
      op('r');
      le(index, 4);
    }
    return index;
  }

  void get(uint32_t index) {
    if (index < 256) {
      op('h');
      le(index, 1);
    } else {
      op('j');
      le(index, 4);
    }
  }

  void integer(int64_t value) {
    MB_CHECK(value >= 0);
    if (value <= 0xff) {
      op('K');
      le(value, 1);
    } else if (value <= 0xffff) {
      op('M');
      le(value, 2);
    } else if (value <= 0x7fffffff) {
      op('J');
      le(value, 4);
    } else {
      // pickle's encode_long: the shortest little-endian two's complement, sign bit included.
      const int bytes = std::bit_width(static_cast<uint64_t>(value)) / 8 + 1;
      op(0x8a);
      le(bytes, 1);
      le(value, bytes);
    }
  }

  // A string object seen for the first time: BINUNICODE, then memoized.
  void new_string(const std::string& text) {
    op('X');
    le(text.size(), 4);
    out.insert(out.end(), text.begin(), text.end());
    memoize();
  }

  // A string that torch.save passes as the same Python object each time ('storage', 'cpu',
  // a storage's key): written once, then fetched from the memo.
  void shared_string(const std::string& text) {
    auto it = strings_.find(text);
    if (it != strings_.end()) return get(it->second);
    op('X');
    le(text.size(), 4);
    out.insert(out.end(), text.begin(), text.end());
    strings_[text] = memoize();
  }

  // GLOBAL the first time a class or function is named, BINGET afterwards.
  void global(const std::string& module, const std::string& name) {
    const std::string key = module + "\n" + name + "\n";
    auto it = globals_.find(key);
    if (it != globals_.end()) return get(it->second);
    op('c');
    out.insert(out.end(), key.begin(), key.end());
    globals_[key] = memoize();
  }

  void int_tuple(const std::vector<int64_t>& values) {
    if (values.empty()) return op(')');  // the empty tuple is a singleton, never memoized
    if (values.size() > 3) op('(');
    for (int64_t value : values) integer(value);
    op(values.size() > 3 ? 't' : static_cast<uint8_t>(0x84 + values.size()));
    memoize();
  }

 private:
  uint32_t next_memo_ = 0;
  std::map<std::string, uint32_t> strings_;
  std::map<std::string, uint32_t> globals_;
};

}  // namespace

std::span<const StorageType> storage_types() {
  return kStorageTypes;
}

const StorageType* storage_type_for_dtype(const std::string& dtype) {
  for (const StorageType& type : kStorageTypes)
    if (dtype == type.dtype) return &type;
  return nullptr;
}

std::string printable(const std::string& text) {
  std::string out;
  for (char c : text.substr(0, 120)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (text.size() > 120) out += "...";
  return out;
}

PickledStateDict unpickle_state_dict(std::span<const uint8_t> pickle, const std::string& where) {
  return Machine(pickle, where).run();
}

std::vector<uint8_t> pickle_state_dict(const std::vector<PickleTensorRecord>& tensors) {
  PickleWriter w;
  w.op(0x80);  // PROTO 2
  w.op(2);
  w.global("collections", "OrderedDict");
  const uint32_t ordered_dict = 0;  // the first memo entry
  w.op(')');
  w.op('R');
  w.memoize();
  // Items go in batches of 1000 (pickle's _BATCHSIZE): MARK ... SETITEMS, or a lone SETITEM.
  for (size_t begin = 0; begin < tensors.size(); begin += 1000) {
    const size_t end = std::min(tensors.size(), begin + 1000);
    if (end - begin > 1) w.op('(');
    for (size_t i = begin; i < end; ++i) {
      const PickleTensorRecord& t = tensors[i];
      std::vector<int64_t> strides(t.shape.size());
      int64_t stride = 1;
      for (size_t d = t.shape.size(); d-- > 0;) {
        strides[d] = stride;
        stride *= std::max<int64_t>(t.shape[d], 1);  // c10's contiguous strides
      }
      w.new_string(t.name);
      w.global("torch._utils", "_rebuild_tensor_v2");
      w.op('(');
      w.op('(');
      w.shared_string("storage");
      w.global("torch", t.type->torch_name);
      w.shared_string(t.key);
      w.shared_string("cpu");
      w.integer(t.storage_numel);
      w.op('t');
      w.memoize();
      w.op('Q');  // BINPERSID
      w.integer(t.offset);
      w.int_tuple(t.shape);
      w.int_tuple(strides);
      w.op(0x89);           // NEWFALSE: requires_grad
      w.get(ordered_dict);  // backward_hooks = OrderedDict()
      w.op(')');
      w.op('R');
      w.memoize();
      w.op('t');
      w.memoize();
      w.op('R');
      w.memoize();
    }
    w.op(end - begin > 1 ? 'u' : 's');
  }
  w.op('.');
  return std::move(w.out);
}

}  // namespace mb
