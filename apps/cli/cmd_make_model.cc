// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "commands.h"
#include "core/error.h"
#include "engine/gguf_convert.h"
#include "io/file_io.h"
#include "model/family.h"
#include "model/make_model.h"
#include "ops/causal_conv.h"
#include "ops/selective_scan.h"

namespace mb::cli {
namespace {

// Writes the checkpoint folder to a scratch folder next to `path` and converts it, so the GGUF
// file holds exactly the weights and tokenizer a folder of the same options would.
void make_gguf_model(const std::string& path, const MakeModelOptions& options, GgufFileType type) {
  const std::filesystem::path scratch = std::filesystem::path(path + ".parts");
  std::filesystem::remove_all(scratch);
  try {
    make_model(scratch.string(), options);
    convert_to_gguf(scratch.string(), path, type, std::filesystem::path(path).stem().string(),
                    options.progress);
  } catch (...) {
    std::filesystem::remove_all(scratch);
    throw;
  }
  std::filesystem::remove_all(scratch);
}

// The options of the hybrids (--arch granite-hybrid | nemotron-h); 0 means the default below.
struct HybridArgs {
  std::string pattern;
  int64_t heads = 4, kv_heads = 2, head_dim = 0, mlp_width = 0, mamba_heads = 0;
  int64_t experts = 0, top_k = 0, expert_width = 0, shared_width = 0, moe_latent_size = 0;
  double routed_scaling_factor = 2.5;
  double attention_multiplier = 0.0, embedding_multiplier = 12.0, residual_multiplier = 0.22,
         logits_scaling = 8.0;
  double rope_theta = 0.0;  // 0: no RoPE
};

void add_hybrid_options(CLI::App* cmd, HybridArgs& h) {
  cmd->add_option(
      "--pattern", h.pattern,
      "Hybrid layer pattern, one character per layer: M (Mamba-2), * (attention), - (MLP, "
      "nemotron-h only), E (mixture of experts, nemotron-h only); Granite layers each add a shared MLP, "
      "and experts with --experts (default: attention every 4th layer from the second, and for "
      "nemotron-h M*- repeated, or M*E with --experts)");
  cmd->add_option("--heads", h.heads, "Hybrid attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", h.kv_heads, "Hybrid KV heads (divide --heads)")->capture_default_str();
  cmd->add_option("--head-dim", h.head_dim, "nemotron-h attention head size (default d_model / heads)");
  cmd->add_option("--mlp-width", h.mlp_width,
                  "Hybrid MLP width, granite-hybrid's shared MLP included (default 2 x d_model)");
  cmd->add_option("--experts", h.experts,
                  "Routed experts of the mixture-of-experts layers (granite-hybrid: every layer's; "
                  "nemotron-h: the E layers'); 0 = dense")
      ->capture_default_str();
  cmd->add_option("--top-k", h.top_k, "Experts chosen per token (default min(2, --experts))");
  cmd->add_option("--expert-width", h.expert_width, "Each routed expert's width (default d_model)");
  cmd->add_option("--shared-width", h.shared_width,
                  "nemotron-h shared expert width (default 2 x --expert-width; granite-hybrid's shared MLP "
                  "is --mlp-width)");
  cmd->add_option("--moe-latent-size", h.moe_latent_size,
                  "nemotron-h: the routed experts' width in LatentMoE (Nemotron-3-Super), projected from and "
                  "back to d_model around them; 0 = none")
      ->capture_default_str();
  cmd->add_option("--routed-scaling-factor", h.routed_scaling_factor,
                  "nemotron-h multiplier of the routed experts' weights")
      ->capture_default_str();
  cmd->add_option("--mamba-heads", h.mamba_heads,
                  "nemotron-h Mamba-2 heads (default expand x d_model / headdim)");
  cmd->add_option("--attention-multiplier", h.attention_multiplier,
                  "granite-hybrid score scale (default 1 / head size)");
  cmd->add_option("--embedding-multiplier", h.embedding_multiplier, "granite-hybrid")->capture_default_str();
  cmd->add_option("--residual-multiplier", h.residual_multiplier, "granite-hybrid")->capture_default_str();
  cmd->add_option("--logits-scaling", h.logits_scaling, "granite-hybrid")->capture_default_str();
  cmd->add_option("--rope-theta", h.rope_theta,
                  "granite-hybrid: RoPE on q and k with this base (position_embedding_type \"rope\", as the "
                  "all-attention Granite-4.0 models; default: none, as Granite-4.0-H)");
}

// The mixture-of-experts section: Granite's every layer, Nemotron-H's E layers.
void configure_experts(bool granite, const HybridArgs& a, ModelConfig& c) {
  check_flag_range("--experts", a.experts, 0, 4096, "0 = dense");
  const bool e_layers = c.hybrid.pattern.find('E') != std::string::npos;
  if (!granite && e_layers != (a.experts > 0))
    throw Error(a.experts > 0 ? "--experts needs E layers in --pattern"
                              : "--pattern holds E layers: give their --experts");
  if (a.experts == 0) {
    if (a.top_k != 0 || a.expert_width != 0 || a.shared_width != 0 || a.moe_latent_size != 0)
      throw Error("--top-k, --expert-width, --shared-width and --moe-latent-size need --experts");
    return;
  }
  check_flag_range("--top-k", a.top_k, 0, a.experts, "0 = min(2, --experts)");
  check_flag_range("--expert-width", a.expert_width, 0, int64_t{1} << 20, "0 = d_model");
  check_flag_range("--shared-width", a.shared_width, 0, int64_t{1} << 20, "0 = 2 x --expert-width");
  if (granite && a.shared_width != 0)
    throw Error("--shared-width is nemotron-h's: granite-hybrid's shared MLP is --mlp-width wide");
  check_flag_range("--moe-latent-size", a.moe_latent_size, 0, int64_t{1} << 20, "0 = none");
  if (granite && a.moe_latent_size != 0) throw Error("--moe-latent-size is nemotron-h's (Nemotron-3-Super)");
  if (!std::isfinite(a.routed_scaling_factor) || a.routed_scaling_factor <= 0.0)
    throw Error("--routed-scaling-factor must be a positive number");
  MoeConfig& e = c.hybrid.moe;
  e.n_experts = a.experts;
  e.top_k = a.top_k > 0 ? a.top_k : std::min<int64_t>(2, a.experts);
  e.width = a.expert_width > 0 ? a.expert_width : c.d_model;
  if (granite) {
    e.scoring = MoeScoring::SoftmaxTopK;
    return;
  }
  e.shared_width = a.shared_width > 0 ? a.shared_width : 2 * e.width;
  e.scoring = MoeScoring::SigmoidBias;
  e.normalize = true;
  e.scale = a.routed_scaling_factor;
  e.latent = a.moe_latent_size;
}

// The hybrid sections of `c`, whose sizes and Mamba-2 mixer the common options have set.
void configure_hybrid(const std::string& arch, const HybridArgs& a, bool n_layer_given, ModelConfig& c) {
  const bool granite = arch == "granite-hybrid";
  c.family = granite ? ModelFamily::GraniteHybrid : ModelFamily::NemotronH;
  c.pad_vocab_size_multiple = 1;  // their configs have no such key: the embedding has vocab_size rows
  HybridConfig& h = c.hybrid;
  h.pattern = a.pattern;
  if (h.pattern.empty()) {
    const char* cycle = a.experts > 0 ? "M*E" : "M*-";
    for (int64_t l = 0; l < c.n_layer; ++l) h.pattern += granite ? (l % 4 == 1 ? '*' : 'M') : cycle[l % 3];
  } else if (n_layer_given && static_cast<int64_t>(h.pattern.size()) != c.n_layer) {
    throw Error("--pattern has " + std::to_string(h.pattern.size()) + " layers but --n-layer says " +
                std::to_string(c.n_layer));
  }
  if (h.pattern.size() > 4096) throw Error("--pattern may have at most 4096 layers");
  c.n_layer = static_cast<int64_t>(h.pattern.size());
  for (char kind : h.pattern)
    if (kind != 'M' && kind != '*' && (granite || (kind != '-' && kind != 'E')))
      throw Error(std::string("--pattern holds '") + kind + "': expected M or *" +
                  (granite ? "" : ", - or E"));
  configure_experts(granite, a, c);
  check_flag_range("--heads", a.heads, 1, 4096);
  check_flag_range("--kv-heads", a.kv_heads, 1, a.heads);
  if (a.heads % a.kv_heads != 0) throw Error("--kv-heads must divide --heads");
  if (granite && (a.head_dim != 0 || c.d_model % a.heads != 0))
    throw Error(
        "granite-hybrid heads are d_model / --heads wide: --heads must divide --d-model (no --head-dim)");
  check_flag_range("--head-dim", a.head_dim, 0, 4096, "0 = d_model / heads");
  check_flag_range("--mlp-width", a.mlp_width, 0, int64_t{1} << 20, "0 = 2 x d_model");
  check_flag_range("--mamba-heads", a.mamba_heads, 0, int64_t{1} << 20, "0 = expand x d_model / headdim");
  const int64_t head_dim = a.head_dim > 0 ? a.head_dim : c.d_model / a.heads;
  h.attention = {a.heads, a.kv_heads, head_dim, 1.0 / std::sqrt(static_cast<double>(head_dim)), false, 0.0};
  if (a.rope_theta != 0.0) {
    if (!granite) throw Error("--rope-theta is granite-hybrid's (Nemotron-H's attention has no RoPE)");
    if (!std::isfinite(a.rope_theta) || a.rope_theta <= 0.0)
      throw Error("--rope-theta must be a positive number");
    if (head_dim % 2 != 0)
      throw Error("--rope-theta needs an even head size (d_model / --heads = " + std::to_string(head_dim) +
                  ")");
    h.attention.rope_theta = a.rope_theta;
  }
  h.mlp = {a.mlp_width > 0 ? a.mlp_width : 2 * c.d_model,
           granite ? Activation::SwiGlu : Activation::ReluSquared, false};
  if (granite) {
    h.attention.scale =
        a.attention_multiplier > 0.0 ? a.attention_multiplier : 1.0 / static_cast<double>(head_dim);
    h.embedding_multiplier = a.embedding_multiplier;
    h.residual_multiplier = a.residual_multiplier;
    h.logits_scaling = a.logits_scaling;
  }
  c.ssm.d_inner = !granite && a.mamba_heads > 0 ? a.mamba_heads * c.ssm.headdim : c.ssm.expand * c.d_model;
}

// The size flags by name, each remembered at registration (see add_make_model).
using SizeOptions = std::map<std::string, CLI::Option*>;

struct MakeModelArgs {
  std::string out, preset = "tiny", dtype = "f32", form = "hf", arch = "mamba1", format = "safetensors";
  int64_t d_model = 0, n_layer = 0, vocab = 0, d_state = 0, d_conv = 0, expand = 0, dt_rank = 0,
          input_dim = 0;
  int64_t seed = 0;  // signed, so that a negative value is refused rather than wrapped
  bool untied = false, use_bias = false, no_conv_bias = false;
  int shards = 1;
  int64_t headdim = 0, ngroups = 0, chunk_size = 0;
  double rope_fraction = 0.5;
  bool outproj_norm = false;
  std::string chat_template_file;  // --chat-template: empty for none
  std::vector<std::string> set;    // --set KEY=VALUE, a declared family's config keys
};

// A declared family's config (model/family.h): its example at the given sizes, then each --set
// KEY=VALUE over it (VALUE as JSON, or else as a string), read by the loader's own parser, so the
// flags are the family's declared keys and their checks the loader's.
ModelConfig declared_family_config(const Family& family, const MakeModelArgs& a, const ModelConfig& sizes) {
  nlohmann::json hf = family.example(sizes.d_model, sizes.n_layer, sizes.vocab_size);
  if (a.untied) hf["tie_word_embeddings"] = false;
  for (const std::string& item : a.set) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw Error("--set " + item + ": expected KEY=VALUE");
    const std::string key = item.substr(0, eq), text = item.substr(eq + 1);
    bool known = hf.contains(key);
    for (const ConfigKey& k : family.keys) {
      known = known || k.hf == key;
      for (const std::string& alias : k.aliases) known = known || alias == key;
    }
    if (!known) throw Error("--set " + key + ": not a config key of " + family.name);
    nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    hf[key] = value.is_discarded() ? nlohmann::json(text) : value;
  }
  return parse_model_config(hf, "make-model --arch " + family.name);
}

// --chat-template's file, parsed first so that make-model never writes a template that `serve`
// would refuse; the error names the file.
std::string read_chat_template_flag(const std::string& path) {
  std::string source;
  try {
    source = read_text_file(path);  // its errors name the path
  } catch (const Error& e) {
    throw Error(std::string("--chat-template: ") + e.what());
  }
  try {
    if (source.empty()) throw Error("the file is empty");
    ChatTemplate::parse(source);
  } catch (const Error& e) {
    throw Error("--chat-template " + path + ": " + e.what());
  }
  return source;
}

// make-model's action: the config from the preset and the flags, checked, then the files.
void run_make_model(const MakeModelArgs& a, const HybridArgs& hybrid, const CLI::Option& form_option,
                    const SizeOptions& sizes) {
  MakeModelOptions o;
  o.config = preset_config(a.preset);
  ModelConfig& c = o.config;
  // The upper bounds are the loader's (config.cc) and the kernels' (d_state, d_conv), so a
  // folder make-model writes always loads.
  auto set = [&](const std::string& flag, int64_t value, int64_t& field, int64_t max) {
    if (sizes.at(flag)->count() == 0) return;
    check_flag_range(flag, value, 1, max);
    field = value;
  };
  set("--d-model", a.d_model, c.d_model, int64_t{1} << 16);
  set("--n-layer", a.n_layer, c.n_layer, 4096);
  set("--vocab", a.vocab, c.vocab_size, int64_t{1} << 24);
  set("--d-state", a.d_state, c.ssm.d_state, kMaxStateSize);
  set("--d-conv", a.d_conv, c.ssm.d_conv, kMaxConvKernel);
  set("--expand", a.expand, c.ssm.expand, 64);
  c.ssm.dt_rank = (c.d_model + 15) / 16;
  set("--dt-rank", a.dt_rank, c.ssm.dt_rank, int64_t{1} << 16);
  c.tie_embeddings = !a.untied;
  c.ssm.use_bias = a.use_bias;
  c.ssm.use_conv_bias = !a.no_conv_bias;
  const bool hybrid_arch = a.arch == "granite-hybrid" || a.arch == "nemotron-h";
  const Family* declared = family_by_name(a.arch);
  if (a.arch != "mamba1" && a.arch != "mamba2" && a.arch != "falcon-mamba" && a.arch != "mamba3" &&
      !hybrid_arch && declared == nullptr) {
    std::string names = "mamba1, mamba2, falcon-mamba, mamba3, granite-hybrid, nemotron-h";
    for (const Family* f : all_families()) names += ", " + f->name;
    throw Error("--arch must be one of " + names);
  }
  if (declared != nullptr) {
    c = declared_family_config(*declared, a, c);
  } else if (!a.set.empty()) {
    throw Error("--set applies to the declared families' keys; --arch " + a.arch + " takes the size flags");
  }
  // FalconMamba is Mamba-1 plus the mixer norm, at FalconMambaConfig's default epsilon.
  c.ssm.mixer_rms_norm = a.arch == "falcon-mamba";
  if (a.arch == "mamba2" || hybrid_arch) {
    // Mamba-2 defaults are mamba_ssm's: d_state 128, headdim 64, ngroups 1, chunk_size 256.
    c.arch = Architecture::Mamba2;
    if (sizes.at("--d-state")->count() == 0) c.ssm.d_state = 128;
    c.ssm.chunk_size = 256;
    set("--headdim", a.headdim, c.ssm.headdim, int64_t{1} << 16);
    set("--ngroups", a.ngroups, c.ssm.ngroups, int64_t{1} << 16);
    set("--chunk-size", a.chunk_size, c.ssm.chunk_size, int64_t{1} << 24);
    if (hybrid_arch) configure_hybrid(a.arch, hybrid, sizes.at("--n-layer")->count() > 0, c);
  } else if (a.arch == "mamba3") {
    // Mamba-3 defaults are mamba_ssm's: d_state 128, headdim 64.
    c.arch = Architecture::Mamba3;
    if (sizes.at("--d-state")->count() == 0) c.ssm.d_state = 128;
    set("--headdim", a.headdim, c.ssm.headdim, int64_t{1} << 16);
    set("--ngroups", a.ngroups, c.ssm.ngroups, int64_t{1} << 16);
    set("--chunk-size", a.chunk_size, c.ssm.chunk_size, int64_t{1} << 24);
    if (a.rope_fraction != 0.5 && a.rope_fraction != 1.0)
      throw Error("--rope-fraction must be 0.5 or 1.0, got " + std::to_string(a.rope_fraction));
    c.ssm.rope_fraction = a.rope_fraction;
    c.ssm.is_outproj_norm = a.outproj_norm;
  }
  check_flag_range("--input-dim", a.input_dim, 0, int64_t{1} << 20, "0 = no input projection");
  check_flag_range("--shards", a.shards, 1, 4096);
  const double values = make_model_value_count(c, a.input_dim);
  if (values > static_cast<double>(kMaxMakeModelValues))
    throw Error("--d-model " + std::to_string(c.d_model) + ", --vocab " + std::to_string(c.vocab_size) +
                ", --n-layer " + std::to_string(c.n_layer) + " and --expand " + std::to_string(c.ssm.expand) +
                " make about " + std::to_string(static_cast<int64_t>(values)) +
                " weight values; make-model writes at most " + std::to_string(kMaxMakeModelValues) +
                " (16 GiB as f32)");
  if (a.form != "hf" && a.form != "original") throw Error("--layout must be hf or original");
  if ((hybrid_arch || declared != nullptr) && a.form == "original")
    throw Error("--layout original: the hybrid models only exist in the Hugging Face layout (use hf)");
  if (a.arch == "mamba3" && a.form == "hf" && form_option.count() > 0)
    throw Error("--layout hf: Mamba-3 checkpoints only exist in the state-spaces layout (use original)");
  if (a.arch == "falcon-mamba" && a.form == "original")
    throw Error("--layout original: FalconMamba checkpoints only exist in the Hugging Face layout (use hf)");
  o.form = a.form == "hf" ? ConfigForm::HuggingFace : ConfigForm::Original;
  if (a.format != "safetensors" && a.format != "bin" && a.format != "gguf")
    throw Error("--format must be safetensors, bin or gguf");
  const bool gguf = a.format == "gguf";
  const GgufFileType gguf_type = gguf ? parse_gguf_file_type(a.dtype) : GgufFileType::F32;
  // A quantized GGUF is made from f32 weights; a float one from weights already in its dtype.
  o.dtype = !gguf                             ? parse_dtype(a.dtype)
            : gguf_type == GgufFileType::F16  ? DType::F16
            : gguf_type == GgufFileType::BF16 ? DType::BF16
                                              : DType::F32;
  check_flag_range("--seed", a.seed, 0, INT64_MAX);
  o.seed = static_cast<uint64_t>(a.seed);
  o.shards = a.shards;
  o.format = a.format == "bin" ? CheckpointFormat::TorchBin : CheckpointFormat::Safetensors;
  o.input_dim = a.input_dim;
  if (!a.chat_template_file.empty()) o.chat_template = read_chat_template_flag(a.chat_template_file);
  {
    // A large model shows its progress on a terminal; the line is erased before the summary.
    ProgressLine progress("make-model");
    o.progress = &progress;
    if (gguf) {
      if (a.shards != 1) throw Error("--format gguf writes one file: --shards must be 1");
      make_gguf_model(a.out, o, gguf_type);
    } else {
      make_model(a.out, o);
    }
  }
  std::fprintf(stderr, "wrote %s (d_model %lld, %lld layers, vocab %lld, %s)\n", a.out.c_str(),
               static_cast<long long>(c.d_model), static_cast<long long>(c.n_layer),
               static_cast<long long>(c.vocab_size), a.dtype.c_str());
}

}  // namespace

void add_make_model(CLI::App& app) {
  auto args = std::make_shared<MakeModelArgs>();
  auto hybrid = std::make_shared<HybridArgs>();
  // Each size option is remembered so the callback can tell "not given" (keep the preset's
  // value) from a given value, which is then checked against its range and never replaced.
  auto sizes = std::make_shared<SizeOptions>();
  CLI::App* cmd =
      app.add_subcommand("make-model", "Write a random-weight checkpoint in the Hugging Face layout");
  auto size_option = [&](const std::string& flag, int64_t& value, const std::string& help) {
    (*sizes)[flag] = cmd->add_option(flag, value, help);
  };
  cmd->add_option("--out", args->out, "Output folder")->required();
  cmd->add_option("--preset", args->preset, "tiny | 130m | 370m")->capture_default_str();
  size_option("--d-model", args->d_model, "Model width");
  size_option("--n-layer", args->n_layer, "Number of layers");
  size_option("--vocab", args->vocab, "Vocabulary size");
  size_option("--d-state", args->d_state, "SSM state size");
  size_option("--d-conv", args->d_conv, "Conv kernel size");
  size_option("--expand", args->expand, "Inner width multiplier");
  size_option("--dt-rank", args->dt_rank, "dt projection rank (default ceil(d_model/16))");
  cmd->add_option("--dtype", args->dtype, "Storage dtype: f32 | bf16 | f16 (gguf also: q8_0 | q4_0 | q4_k_m)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--untied", args->untied, "Write a separate lm_head.weight");
  cmd->add_flag("--use-bias", args->use_bias, "Add in_proj/out_proj biases");
  cmd->add_flag("--no-conv-bias", args->no_conv_bias, "Omit the conv1d bias (use_conv_bias = false)");
  cmd->add_option("--shards", args->shards, "Number of safetensors shards")->capture_default_str();
  cmd->add_option("--format", args->format,
                  "Weights file: safetensors | bin (pytorch_model.bin) | gguf (--out names a .gguf file)")
      ->capture_default_str();
  cmd->add_option("--input-dim", args->input_dim, "Add an input projection from raw features of this width");
  CLI::Option* form_option = cmd->add_option("--layout,--config-form", args->form,
                                             "Checkpoint layout: hf (Hugging Face names and config) | "
                                             "original (state-spaces; Mamba-3: original only)");
  cmd->add_option(
         "--arch", args->arch,
         "mamba1 | mamba2 | falcon-mamba (HF layout) | mamba3 (Mamba-3 SISO, state-spaces layout) | "
         "granite-hybrid | nemotron-h (hybrids: Mamba-2, attention, MLP and mixture-of-experts layers)")
      ->capture_default_str();
  size_option("--headdim", args->headdim, "Mamba-2/3 channels per head (default 64)");
  size_option("--ngroups", args->ngroups, "Mamba-2/3 B/C groups (default 1)");
  cmd->add_option("--rope-fraction", args->rope_fraction, "Mamba-3 rotated fraction of d_state: 0.5 | 1.0")
      ->capture_default_str();
  cmd->add_flag("--outproj-norm", args->outproj_norm,
                "Mamba-3 gated RMSNorm before out_proj (is_outproj_norm)");
  size_option("--chunk-size", args->chunk_size, "Mamba-2/3 SSD chunk length (default 256 / 64)");
  cmd->add_option("--chat-template", args->chat_template_file,
                  "A Jinja chat template file, written into tokenizer_config.json (serve and chat use it; "
                  "--format gguf carries it as tokenizer.chat_template)");
  add_hybrid_options(cmd, *hybrid);
  cmd->add_option("--set", args->set,
                  "KEY=VALUE (repeatable): a config.json key of a declared family's --arch, VALUE as JSON "
                  "(4, 1e-6, true, \"rope\", [1,2]) or else a string");
  cmd->callback([args, hybrid, form_option, sizes] { run_make_model(*args, *hybrid, *form_option, *sizes); });
}

}  // namespace mb::cli
