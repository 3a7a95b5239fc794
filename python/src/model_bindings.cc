// SPDX-License-Identifier: MIT
// The Model and State classes of the extension module: loading, tokenizing, and the forward
// pass over token ids or feature rows, with numpy arrays in and out.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine.h"
#include "engine/embed.h"
#include "engine/gguf_tokenizer.h"
#include "engine/state_file.h"

namespace mb::python {

namespace {

// One input of a forward call: token ids, or feature rows read in place from a numpy array
// (`keep` holds the array, or its float32 copy, for as long as the rows are read).
struct PyInput {
  std::vector<int32_t> tokens;
  py::array_t<float> keep;
  std::span<const float> features;  // [T, input_dim]
};

std::string shape_text(const py::array& array) {
  std::string text = "[";
  for (py::ssize_t d = 0; d < array.ndim(); ++d) text += (d ? ", " : "") + std::to_string(array.shape(d));
  return text + "]";
}

std::string dtype_text(const py::array& array) {
  return py::str(array.dtype()).cast<std::string>();
}

// Token ids from a list of ints or a 1-D integer array; mb::Error for anything else. The ids'
// range is checked by Model::forward, against the model's vocabulary.
std::vector<int32_t> token_ids(const py::handle& input, const char* what) {
  py::array array;
  try {
    array = py::array::ensure(input);
  } catch (const py::error_already_set&) {
  }
  if (!array || array.ndim() != 1 || (array.dtype().kind() != 'i' && array.dtype().kind() != 'u'))
    throw Error(std::string(what) + " must be a list or 1-D array of integer token ids, got " +
                std::string(py::str(py::type::of(input).attr("__name__"))) +
                (array ? " of dtype " + dtype_text(array) + " and shape " + shape_text(array) : ""));
  const auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!wide) throw Error(std::string(what) + ": token ids do not fit in 64-bit integers");
  std::vector<int32_t> ids(static_cast<size_t>(wide.size()));
  for (py::ssize_t i = 0; i < wide.size(); ++i) {
    const int64_t id = wide.data()[i];
    if (id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max())
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary");
    ids[static_cast<size_t>(i)] = static_cast<int32_t>(id);
  }
  return ids;
}

// Feature rows [T, input_dim]: a C-contiguous float32 array is read where it lies; other real
// or integer arrays (float64 from numpy's defaults, say) are converted to float32 once.
PyInput feature_rows(const py::handle& input, int64_t input_dim) {
  const std::string expected = "a float32 array of shape [T, " + std::to_string(input_dim) + "]";
  py::array array;
  try {
    array = py::array::ensure(input);
  } catch (const py::error_already_set&) {
  }
  if (!array) throw Error("features must be " + expected);
  const char kind = array.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u')
    throw Error("features must be " + expected + ", got dtype " + dtype_text(array));
  if (array.ndim() != 2 || array.shape(1) != input_dim || array.shape(0) < 1)
    throw Error("features must be " + expected + " with T >= 1, got shape " + shape_text(array));
  PyInput result;
  result.keep = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
  result.features = std::span<const float>(result.keep.data(), static_cast<size_t>(result.keep.size()));
  return result;
}

// Ids for a checkpoint that takes tokens, feature rows for one with an input projection.
PyInput model_input(const Engine& engine, const py::handle& input) {
  const int64_t input_dim = engine.model->input_dim();
  if (input_dim > 0) return feature_rows(input, input_dim);
  PyInput result;
  result.tokens = token_ids(input, "the input");
  return result;
}

OutputKind hidden_output(const std::string& output) {
  if (output == "all") return OutputKind::HiddenAll;
  if (output == "last") return OutputKind::HiddenLast;
  if (output == "mean") return OutputKind::HiddenMean;
  throw Error("output must be 'all', 'last' or 'mean', got '" + output + "'");
}

// A numpy array that owns a copy of `values`, shaped [rows, width], or [width] when `flat`.
py::array_t<float> to_numpy(const std::vector<float>& values, int64_t width, bool flat) {
  const auto rows = static_cast<py::ssize_t>(values.size() / static_cast<size_t>(width));
  const auto columns = static_cast<py::ssize_t>(width);
  py::array_t<float> array = flat ? py::array_t<float>(std::vector<py::ssize_t>{columns})
                                  : py::array_t<float>(std::vector<py::ssize_t>{rows, columns});
  std::memcpy(array.mutable_data(), values.data(), values.size() * sizeof(float));
  return array;
}

PyState& own_state(const std::shared_ptr<Engine>& engine, PyState& state) {
  if (state.engine != engine) throw Error("the state belongs to another model");
  return state;
}

// Runs one forward call under the engine's lock with the GIL released. `states[i]` may be null
// (a fresh state that is dropped afterwards).
std::vector<std::vector<float>> run_forward(Engine& engine, std::vector<PyInput>& inputs,
                                            const std::vector<PyState*>& states, OutputKind kind) {
  std::vector<SequenceState> fresh(inputs.size());
  std::vector<SequenceInput> batch(inputs.size());
  std::vector<std::vector<float>> outputs;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(engine.mutex);
    for (size_t i = 0; i < inputs.size(); ++i) {
      SequenceState* state = states[i] ? &states[i]->state : &fresh[i];
      if (!states[i]) *state = engine.model->new_state();
      batch[i] = SequenceInput{state, inputs[i].tokens, inputs[i].features};
    }
    ForwardOptions options;
    options.output = kind;
    engine.model->forward(engine.ctx, batch, options, engine.workspace, outputs);
  }
  return outputs;
}

}  // namespace

PyModel::PyModel(const std::string& path, const std::string& device, const std::optional<std::string>& dtype,
                 int threads)
    : engine_(load_engine(path, device, dtype, threads)) {}

std::vector<int32_t> PyModel::tokenize(const std::string& text) const {
  return engine_->require_tokenizer().encode(text);
}

std::string PyModel::detokenize(const py::handle& ids, bool skip_special) const {
  return engine_->require_tokenizer().decode(token_ids(ids, "ids"), skip_special);
}

PyState PyModel::new_state() const {
  py::gil_scoped_release release;
  std::lock_guard lock(engine_->mutex);
  return PyState{engine_, engine_->model->new_state()};
}

py::array_t<float> PyModel::forward(const py::handle& input, const std::string& output, PyState* state) {
  const OutputKind kind = hidden_output(output);
  std::vector<PyInput> inputs;
  inputs.push_back(model_input(*engine_, input));
  const std::vector<PyState*> states{state ? &own_state(engine_, *state) : nullptr};
  const auto outputs = run_forward(*engine_, inputs, states, kind);
  return to_numpy(outputs[0], engine_->model->output_width(kind), kind != OutputKind::HiddenAll);
}

py::object PyModel::forward_batch(const py::list& pages, const std::string& output,
                                  const py::object& states_arg) {
  const OutputKind kind = hidden_output(output);
  std::vector<PyInput> inputs;
  for (const py::handle page : pages) inputs.push_back(model_input(*engine_, page));
  std::vector<PyState*> states(inputs.size(), nullptr);
  if (!states_arg.is_none()) {
    const auto list = states_arg.cast<std::vector<PyState*>>();
    if (list.size() != inputs.size())
      throw Error("states must hold one state per page: " + std::to_string(inputs.size()) + " pages, " +
                  std::to_string(list.size()) + " states");
    for (size_t i = 0; i < list.size(); ++i) states[i] = list[i] ? &own_state(engine_, *list[i]) : nullptr;
  }
  const auto outputs = run_forward(*engine_, inputs, states, kind);
  const int64_t width = engine_->model->output_width(kind);
  if (kind == OutputKind::HiddenAll) {
    py::list arrays;
    for (const auto& rows : outputs) arrays.append(to_numpy(rows, width, false));
    return arrays;
  }
  // "last" and "mean" give one row per page: stacked into [pages, d_model].
  std::vector<float> stacked;
  stacked.reserve(outputs.size() * static_cast<size_t>(width));
  for (const auto& row : outputs) stacked.insert(stacked.end(), row.begin(), row.end());
  if (stacked.empty())
    return py::array_t<float>(std::vector<py::ssize_t>{0, static_cast<py::ssize_t>(width)});
  return to_numpy(stacked, width, false);
}

py::array_t<float> PyModel::embed(const py::handle& input, const std::string& pooling, bool normalize) {
  EmbedOptions options;
  options.pooling = parse_pooling(pooling);
  options.normalize = normalize;
  // One input: a str, or a flat sequence of ids; else a list of them, one vector each.
  const auto is_ids = [](const py::handle& item) {
    if (py::isinstance<py::str>(item) || py::isinstance<py::bytes>(item)) return false;
    if (py::isinstance<py::array>(item)) return py::reinterpret_borrow<py::array>(item).ndim() == 1;
    if (!py::isinstance<py::sequence>(item)) return false;
    const auto seq = py::reinterpret_borrow<py::sequence>(item);
    return seq.size() > 0 && py::isinstance<py::int_>(seq[0]);
  };
  const bool single = py::isinstance<py::str>(input) || is_ids(input);
  std::vector<std::vector<int32_t>> inputs;
  const auto add = [&](const py::handle& item) {
    const std::string what = "input " + std::to_string(inputs.size());
    if (py::isinstance<py::str>(item)) {
      const auto text = item.cast<std::string>();
      if (text.empty()) throw Error(what + " is an empty string");
      inputs.push_back(engine_->require_tokenizer().encode(text));
    } else {
      if (py::isinstance<py::sequence>(item) && py::len(item) == 0)
        throw Error(what + " is empty (no tokens to embed)");
      inputs.push_back(token_ids(item, what.c_str()));
    }
  };
  if (single) {
    add(input);
  } else {
    if (!py::isinstance<py::sequence>(input) || py::isinstance<py::bytes>(input))
      throw Error("input must be a str, a sequence of token ids, or a list of either, got " +
                  std::string(py::str(py::type::of(input).attr("__name__"))));
    for (const py::handle item : py::reinterpret_borrow<py::sequence>(input)) add(item);
    if (inputs.empty()) throw Error("input is an empty list: give at least one text or id sequence");
  }
  std::vector<std::vector<float>> rows;
  {
    py::gil_scoped_release release;
    std::lock_guard lock(engine_->mutex);
    rows = embed_batch(*engine_->model, engine_->ctx, inputs, options, engine_->workspace);
  }
  const int64_t width = engine_->model->config().d_model;
  std::vector<float> stacked;
  stacked.reserve(rows.size() * static_cast<size_t>(width));
  for (const auto& row : rows) stacked.insert(stacked.end(), row.begin(), row.end());
  return to_numpy(stacked, width, single);
}

py::array_t<float> PyModel::logits(const py::handle& ids, bool all_positions, PyState* state) {
  const OutputKind kind = all_positions ? OutputKind::LogitsAll : OutputKind::LogitsLast;
  std::vector<PyInput> inputs(1);
  inputs[0].tokens = token_ids(ids, "ids");
  const std::vector<PyState*> states{state ? &own_state(engine_, *state) : nullptr};
  const auto outputs = run_forward(*engine_, inputs, states, kind);
  return to_numpy(outputs[0], engine_->model->output_width(kind), !all_positions);
}

py::class_<PyModel> bind_model(py::module_& m) {
  py::class_<PyState>(m, "State", "A sequence's recurrent state (see mambacpp.State).")
      .def_property_readonly(
          "position", [](const PyState& s) { return s.state.position; }, "Tokens or rows the state has read.")
      .def_property_readonly(
          "nbytes", [](const PyState& s) { return s.state.bytes(); }, "Bytes the state holds.")
      .def(
          "copy",
          [](const PyState& s) {
            py::gil_scoped_release release;
            std::lock_guard lock(s.engine->mutex);
            return PyState{s.engine, s.state};
          },
          "A copy that continues independently (a fork of the sequence).")
      .def(
          "save",
          [](const PyState& s, const std::string& path) {
            py::gil_scoped_release release;
            std::lock_guard lock(s.engine->mutex);
            save_state(path, *s.engine->model, s.state);
          },
          py::arg("path"), "Writes the state to a file (atomically), for State.load with the same model.")
      .def_static(
          "load",
          [](const std::string& path, const PyModel& model) {
            const auto& engine = model.engine();
            py::gil_scoped_release release;
            std::lock_guard lock(engine->mutex);
            return PyState{engine, load_state(path, *engine->model)};
          },
          py::arg("path"), py::arg("model"),
          "Reads a state saved by State.save; Error when it belongs to another model.");

  py::class_<PyModel> model(m, "Model", "A loaded checkpoint (see mambacpp.Model).");
  model
      .def(py::init<const std::string&, const std::string&, const std::optional<std::string>&, int>(),
           py::arg("path"), py::arg("device") = "cpu", py::arg("dtype") = py::none(), py::arg("threads") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly(
          "vocab_size", [](const PyModel& m) { return m.config().vocab_size; }, "Rows of the output head.")
      .def_property_readonly(
          "d_model", [](const PyModel& m) { return m.config().d_model; }, "Width of the hidden state.")
      .def_property_readonly(
          "n_layer", [](const PyModel& m) { return m.config().n_layer; }, "Number of layers.")
      .def_property_readonly(
          "input_dim", [](const PyModel& m) { return m.engine()->model->input_dim(); },
          "Features per input row (0: the model reads token ids).")
      .def_property_readonly(
          "fingerprint", [](const PyModel& m) { return m.engine()->model->fingerprint(); },
          "A hash of the weights and configuration (what state files are checked against).")
      .def_property_readonly(
          "eos_token_ids", [](const PyModel& m) { return m.config().eos_token_ids; },
          "The end-of-text token ids that stop generation.")
      .def_property_readonly(
          "dtype",
          [](const PyModel& m) { return std::string(dtype_name(m.engine()->model->matrix_dtype())); },
          "Storage type of the weight matrices (\"f32\", \"q4_k\", ...).")
      .def_property_readonly(
          "device", [](const PyModel& m) { return m.engine()->model->backend().description(); },
          "The device the model runs on.")
      .def_property_readonly(
          "threads", [](const PyModel& m) { return m.engine()->ctx.n_threads; }, "Compute threads.")
      .def_property_readonly(
          "has_tokenizer", [](const PyModel& m) { return m.engine()->tokenizer.has_value(); },
          "Whether the checkpoint has a tokenizer.")
      .def_property_readonly(
          "path", [](const PyModel& m) { return m.engine()->path; }, "The checkpoint's path.")
      .def("tokenize", &PyModel::tokenize, py::arg("text"), "The token ids of a text (no BOS is added).")
      .def("detokenize", &PyModel::detokenize, py::arg("ids"), py::arg("skip_special") = false,
           "The text of token ids; skip_special leaves special tokens out.")
      .def("new_state", &PyModel::new_state, "A fresh state, to carry a sequence across calls.")
      .def("forward", &PyModel::forward, py::arg("input"), py::arg("output") = "all",
           py::arg("state") = nullptr,
           "Hidden states after the final norm of token ids or feature rows: output \"all\" [T, d_model], "
           "\"last\" or \"mean\" [d_model]; a state carries the sequence across calls.")
      .def("forward_batch", &PyModel::forward_batch, py::arg("pages"), py::arg("output") = "last",
           py::arg("states") = py::none(),
           "forward over many pages in one pass over the weights: a list of [T_i, d_model] arrays for "
           "\"all\", one [pages, d_model] array for \"last\" and \"mean\".")
      .def("embed", &PyModel::embed, py::arg("input"), py::arg("pooling") = "mean",
           py::arg("normalize") = true,
           "Embeddings of a str, a sequence of token ids, or a list of either: the final hidden state (after "
           "the final norm) pooled by \"mean\" or \"last\" and L2-normalised (in float64, rounded to "
           "float32 once), float32 [d_model] for one input or [inputs, d_model] for a list, in one batched "
           "pass; each vector is bit-identical to its input's alone.")
      .def("logits", &PyModel::logits, py::arg("ids"), py::arg("all_positions") = false,
           py::arg("state") = nullptr,
           "Logits float32 [vocab_size] at the last position, or [T, vocab_size] with all_positions.");
  return model;
}

}  // namespace mb::python
