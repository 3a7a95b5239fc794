// SPDX-License-Identifier: MIT
/* Generates a few tokens with mambacpp's C API: usage `consumer MODEL [PROMPT]`. The README's
 * C example; tests/capi/install_test.cmake builds it against an installed prefix and runs it. */
#include <mambacpp.h>
#include <stdio.h>

static int print_piece(int32_t token, const char* piece, size_t piece_len, void* user_data) {
  (void)token;
  (void)user_data;
  fwrite(piece, 1, piece_len, stdout);
  return 0; /* nonzero stops generation */
}

int main(int argc, char** argv) {
  mb_model* model = NULL;
  mb_generate_params params = mb_generate_params_default();
  mb_generate_result result;
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL [PROMPT]\n", argv[0]);
    return 2;
  }
  if (mb_model_load(argv[1], NULL, &model) != MB_OK) {
    fprintf(stderr, "%s\n", mb_last_error());
    return 1;
  }
  params.prompt = argc > 2 ? argv[2] : "The state space model";
  params.max_tokens = 8;
  params.sampling.seed = 1;
  params.stop_at_eos = 0;
  params.callback = print_piece;
  if (mb_generate(model, NULL, &params, &result) != MB_OK) {
    fprintf(stderr, "%s\n", mb_last_error());
    mb_model_free(model);
    return 1;
  }
  printf("\n[mambacpp %s: %zu tokens]\n", mb_version(), result.n_tokens);
  mb_generate_result_free(&result);
  mb_model_free(model);
  return 0;
}
