#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "core/error.h"
#include "model/make_model.h"

namespace mb::cli {

void add_make_model(CLI::App& app) {
  struct Args {
    std::string out, preset = "tiny", dtype = "f32", form = "hf", arch = "mamba1", format = "safetensors";
    int64_t d_model = 0, n_layer = 0, vocab = 0, d_state = 0, d_conv = 0, expand = 0, dt_rank = 0, input_dim = 0;
    uint64_t seed = 0;
    bool untied = false, use_bias = false, no_conv_bias = false;
    int shards = 1;
    int64_t headdim = 0, ngroups = 0, chunk_size = 0;
    double rope_fraction = 0.5;
    bool outproj_norm = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("make-model", "Write a random-weight checkpoint in the Hugging Face layout");
  cmd->add_option("--out", args->out, "Output folder")->required();
  cmd->add_option("--preset", args->preset, "tiny | 130m")->capture_default_str();
  cmd->add_option("--d-model", args->d_model, "Model width");
  cmd->add_option("--n-layer", args->n_layer, "Number of layers");
  cmd->add_option("--vocab", args->vocab, "Vocabulary size");
  cmd->add_option("--d-state", args->d_state, "SSM state size");
  cmd->add_option("--d-conv", args->d_conv, "Conv kernel size");
  cmd->add_option("--expand", args->expand, "Inner width multiplier");
  cmd->add_option("--dt-rank", args->dt_rank, "dt projection rank (default ceil(d_model/16))");
  cmd->add_option("--dtype", args->dtype, "Storage dtype: f32 | bf16 | f16")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_flag("--untied", args->untied, "Write a separate lm_head.weight");
  cmd->add_flag("--use-bias", args->use_bias, "Add in_proj/out_proj biases");
  cmd->add_flag("--no-conv-bias", args->no_conv_bias, "Omit the conv1d bias (use_conv_bias = false)");
  cmd->add_option("--shards", args->shards, "Number of safetensors shards")->capture_default_str();
  cmd->add_option("--format", args->format, "Weights file: safetensors | bin (pytorch_model.bin)")
      ->capture_default_str();
  cmd->add_option("--input-dim", args->input_dim, "Add an input projection from raw features of this width");
  CLI::Option* form_option = cmd->add_option(
      "--layout,--config-form", args->form,
      "Checkpoint layout: hf (Hugging Face names and config) | original (state-spaces; Mamba-3: original only)");
  cmd->add_option("--arch", args->arch,
                  "mamba1 | mamba2 | falcon-mamba (HF layout) | mamba3 (Mamba-3 SISO, state-spaces layout)")
      ->capture_default_str();
  cmd->add_option("--headdim", args->headdim, "Mamba-2/3 channels per head (default 64)");
  cmd->add_option("--ngroups", args->ngroups, "Mamba-2/3 B/C groups (default 1)");
  cmd->add_option("--rope-fraction", args->rope_fraction, "Mamba-3 rotated fraction of d_state: 0.5 | 1.0")
      ->capture_default_str();
  cmd->add_flag("--outproj-norm", args->outproj_norm, "Mamba-3 gated RMSNorm before out_proj (is_outproj_norm)");
  cmd->add_option("--chunk-size", args->chunk_size, "Mamba-2/3 SSD chunk length (default 256 / 64)");
  cmd->callback([args, form_option] {
    MakeModelOptions o;
    o.config = preset_config(args->preset);
    ModelConfig& c = o.config;
    auto set = [](int64_t value, int64_t& field, const char* flag) {
      if (value < 0) throw Error(std::string(flag) + " must be positive");
      if (value > 0) field = value;
    };
    set(args->d_model, c.d_model, "--d-model");
    set(args->n_layer, c.n_layer, "--n-layer");
    set(args->vocab, c.vocab_size, "--vocab");
    set(args->d_state, c.d_state, "--d-state");
    set(args->d_conv, c.d_conv, "--d-conv");
    set(args->expand, c.expand, "--expand");
    c.dt_rank = args->dt_rank > 0 ? args->dt_rank : (c.d_model + 15) / 16;
    c.tie_embeddings = !args->untied;
    c.use_bias = args->use_bias;
    c.use_conv_bias = !args->no_conv_bias;
    if (args->arch != "mamba1" && args->arch != "mamba2" && args->arch != "falcon-mamba" && args->arch != "mamba3")
      throw Error("--arch must be mamba1, mamba2, falcon-mamba or mamba3");
    // FalconMamba is Mamba-1 plus the mixer norm, at FalconMambaConfig's default epsilon.
    c.mixer_rms_norm = args->arch == "falcon-mamba";
    if (args->arch == "mamba2") {
      // Mamba-2 defaults are mamba_ssm's: d_state 128, headdim 64, ngroups 1, chunk_size 256.
      c.arch = Architecture::Mamba2;
      c.d_state = args->d_state > 0 ? args->d_state : 128;
      c.chunk_size = 256;
      set(args->headdim, c.headdim, "--headdim");
      set(args->ngroups, c.ngroups, "--ngroups");
      set(args->chunk_size, c.chunk_size, "--chunk-size");
    } else if (args->arch == "mamba3") {
      // Mamba-3 defaults are mamba_ssm's: d_state 128, headdim 64.
      c.arch = Architecture::Mamba3;
      c.d_state = args->d_state > 0 ? args->d_state : 128;
      set(args->headdim, c.headdim, "--headdim");
      set(args->ngroups, c.ngroups, "--ngroups");
      set(args->chunk_size, c.chunk_size, "--chunk-size");
      c.rope_fraction = args->rope_fraction;
      c.is_outproj_norm = args->outproj_norm;
    }
    if (args->input_dim < 0) throw Error("--input-dim must be positive");
    if (args->form != "hf" && args->form != "original") throw Error("--layout must be hf or original");
    if (args->arch == "mamba3" && args->form == "hf" && form_option->count() > 0)
      throw Error("--layout hf: Mamba-3 checkpoints only exist in the state-spaces layout (use original)");
    if (args->arch == "falcon-mamba" && args->form == "original")
      throw Error("--layout original: FalconMamba checkpoints only exist in the Hugging Face layout (use hf)");
    o.form = args->form == "hf" ? ConfigForm::HuggingFace : ConfigForm::Original;
    o.dtype = parse_dtype(args->dtype);
    o.seed = args->seed;
    o.shards = args->shards;
    if (args->format != "safetensors" && args->format != "bin")
      throw Error("--format must be safetensors or bin");
    o.format = args->format == "bin" ? CheckpointFormat::TorchBin : CheckpointFormat::Safetensors;
    o.input_dim = args->input_dim;
    make_model(args->out, o);
    std::fprintf(stderr, "wrote %s (d_model %lld, %lld layers, vocab %lld, %s)\n", args->out.c_str(),
                 static_cast<long long>(c.d_model), static_cast<long long>(c.n_layer),
                 static_cast<long long>(c.vocab_size), args->dtype.c_str());
  });
}

}  // namespace mb::cli
