// SPDX-License-Identifier: MIT
// The C API's generation: mb_generate runs engine/generate.h's Generator on one request and
// streams each token to the caller's callback, which may stop it.
#include <string>
#include <vector>

#include "capi_common.h"
#include "engine/generate.h"

using mb::capi::CallError;
using mb::capi::guard;
using mb::capi::LoadedModel;
using mb::capi::Lock;
using mb::capi::require;
using mb::capi::sampling_params;
using mb::capi::stop_reason;

namespace {

// The request of `params`: its prompt tokenized or copied, its settings checked by the engine.
mb::GenerateRequest make_request(const LoadedModel& model, const mb_generate_params& params) {
  mb::GenerateRequest request;
  if (params.prompt != nullptr) {
    if (params.n_prompt_tokens > 0)
      throw CallError(MB_ERR_INVALID_ARGUMENT, "give the prompt as text or as tokens, not both");
    if (!model.tokenizer)
      throw CallError(MB_ERR_UNSUPPORTED, "a text prompt needs a tokenizer, and the model has none");
    request.prompt = model.tokenizer->encode(params.prompt);
  } else {
    if (params.n_prompt_tokens > 0) require(params.prompt_tokens, "params->prompt_tokens");
    request.prompt.assign(params.prompt_tokens, params.prompt_tokens + params.n_prompt_tokens);
  }
  request.max_new_tokens = params.max_tokens;
  request.sampling = sampling_params(params.sampling);
  request.stop_at_eos = params.stop_at_eos != 0;
  return request;
}

}  // namespace

extern "C" {

mb_sampling mb_sampling_default(void) {
  const mb::SamplingParams d;
  return mb_sampling{d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed};
}

mb_generate_params mb_generate_params_default(void) {
  mb_generate_params params{};
  params.max_tokens = 16;
  params.sampling = mb_sampling_default();
  params.stop_at_eos = 1;
  return params;
}

mb_status mb_generate(mb_model* model, mb_state* state, const mb_generate_params* params,
                      mb_generate_result* result) {
  if (result != nullptr) *result = mb_generate_result{};
  return guard("mb_generate", MB_ERR_INVALID_ARGUMENT, [&] {
    require(model, "model");
    LoadedModel& impl = *model->impl;
    require(params, "params");
    require(result, "result");
    if (state != nullptr && state->model.get() != &impl)
      throw CallError(MB_ERR_INVALID_ARGUMENT, "state belongs to another model");
    const mb::GenerateRequest request = make_request(impl, *params);
    mb::StreamCallback on_token;
    if (params->callback != nullptr) {
      on_token = [params](const mb::StreamEvent& event) {
        // The piece is handed over NUL-terminated, which a string_view is not.
        const std::string piece(event.text);
        return params->callback(event.token, piece.c_str(), piece.size(), params->user_data) == 0;
      };
    }
    mb::GenerateResult generated;
    {
      const Lock lock(impl);
      mb::SequenceState fresh;
      if (state == nullptr) fresh = impl.model->new_state();
      mb::Generator generator(*impl.model, impl.tokenizer ? &*impl.tokenizer : nullptr,
                              mb::capi::context_of(impl));
      generated = generator.generate(request, state == nullptr ? fresh : state->state, on_token);
    }
    mb_generate_result out{};
    try {
      out.tokens = mb::capi::copy_to_malloc(generated.tokens.data(), generated.tokens.size());
      out.n_tokens = generated.tokens.size();
      out.text = mb::capi::copy_string(generated.text);
      out.text_len = generated.text.size();
    } catch (...) {
      mb_generate_result_free(&out);
      throw;
    }
    out.prompt_tokens = generated.prompt_tokens;
    out.stop_reason = stop_reason(generated.stop_reason);
    *result = out;
  });
}

void mb_generate_result_free(mb_generate_result* result) {
  if (result == nullptr) return;
  std::free(result->tokens);
  std::free(result->text);
  *result = mb_generate_result{};
}

}  // extern "C"
