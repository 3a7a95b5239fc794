// SPDX-License-Identifier: MIT
/* The C API (include/mambacpp.h) driven from C11: every call, its errors, and the exactness
 * claims: a batch equals each sequence alone bit for bit, logits equal what `mambacpp logits`
 * writes bit for bit, greedy generation equals a loop of greedy forward steps, and a chat's
 * resumed turn equals a fresh chat's answer.
 *
 * Usage: test_capi CLI WORK_DIR, where CLI is the command that starts the mambacpp program (under
 * an emulator in a cross build) and WORK_DIR a folder for the models it makes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mambacpp.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

/* A call that must succeed; on failure the library's message is printed. */
#define EXPECT_OK(call)                                                                                  \
  do {                                                                                                   \
    mb_status status_ = (call);                                                                          \
    if (status_ != MB_OK) {                                                                              \
      fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call, mb_status_name(status_), \
              mb_last_error());                                                                          \
      ++failures;                                                                                        \
    }                                                                                                    \
  } while (0)

/* A call that must fail with `expected` and leave a message saying why. */
#define EXPECT_STATUS(call, expected)                                                                   \
  do {                                                                                                  \
    mb_status status_ = (call);                                                                         \
    if (status_ != (expected) || mb_last_error()[0] == '\0') {                                          \
      fprintf(stderr, "%s:%d: %s returned %s (expected %s), message '%s'\n", __FILE__, __LINE__, #call, \
              mb_status_name(status_), mb_status_name(expected), mb_last_error());                      \
      ++failures;                                                                                       \
    } else {                                                                                            \
      printf("  expected error: %s\n", mb_last_error());                                                \
    }                                                                                                   \
  } while (0)

#define VOCAB 301
#define D_MODEL 32

static const char* cli;
static const char* work;

static void run_command(const char* command) {
  printf("$ %s\n", command);
  fflush(stdout);
  if (system(command) != 0) {
    fprintf(stderr, "command failed: %s\n", command);
    exit(1);
  }
}

/* WORK_DIR/name into `out` (of `size` bytes). */
static void work_path(char* out, size_t size, const char* name) {
  snprintf(out, size, "%s/%s", work, name);
}

/* A tiny random checkpoint with a tokenizer, as tests/server/serve_util.py makes it. */
static void make_model(const char* name, const char* extra) {
  char path[1024], command[8192];
  work_path(path, sizeof path, name);
  snprintf(command, sizeof command,
           "%s make-model --out %s --d-model %d --n-layer 2 --vocab %d --seed 3 %s >/dev/null", cli, path,
           D_MODEL, VOCAB, extra);
  run_command(command);
}

/* The float32 values of a .npy file written by `mambacpp logits`, whose shape must be `shape`
 * (as numpy prints it, e.g. "(5, 301)"); returns the count in *count. */
static float* read_npy(const char* path, const char* shape, size_t* count) {
  FILE* file = fopen(path, "rb");
  unsigned char* bytes;
  long size;
  size_t header_len;
  float* values;
  char expected[64];
  if (file == NULL) return NULL;
  fseek(file, 0, SEEK_END);
  size = ftell(file);
  fseek(file, 0, SEEK_SET);
  bytes = malloc((size_t)size);
  if (bytes == NULL || fread(bytes, 1, (size_t)size, file) != (size_t)size || size < 10 ||
      memcmp(bytes, "\x93NUMPY\x01\x00", 8) != 0) {
    fclose(file);
    free(bytes);
    return NULL;
  }
  fclose(file);
  header_len = (size_t)bytes[8] | (size_t)bytes[9] << 8;
  snprintf(expected, sizeof expected, "'shape': %s", shape);
  CHECK(10 + header_len <= (size_t)size);
  CHECK(strstr((const char*)bytes + 10, expected) != NULL);
  CHECK(strstr((const char*)bytes + 10, "'<f4'") != NULL);
  *count = ((size_t)size - 10 - header_len) / sizeof(float);
  values = malloc(*count * sizeof(float));
  if (values != NULL) memcpy(values, bytes + 10 + header_len, *count * sizeof(float));
  free(bytes);
  return values;
}

/* A state's host values (its floats in *count), malloc'ed. */
static float* state_values(const mb_state* state, size_t* count) {
  float* values;
  *count = 0;
  EXPECT_OK(mb_state_read(state, NULL, count));
  values = malloc(*count * sizeof(float) + 1);
  EXPECT_OK(mb_state_read(state, values, count));
  return values;
}

static int same_state(const mb_state* a, const mb_state* b) {
  size_t na, nb;
  float* va = state_values(a, &na);
  float* vb = state_values(b, &nb);
  int same = na == nb && na > 0 && memcmp(va, vb, na * sizeof(float)) == 0;
  free(va);
  free(vb);
  return same;
}

static int same_output(const mb_output* a, const mb_output* b) {
  return a->rows == b->rows && a->width == b->width && a->rows > 0 &&
         memcmp(a->data, b->data, (size_t)(a->rows * a->width) * sizeof(float)) == 0;
}

static void test_version_and_load_errors(const char* model_dir) {
  mb_model* model = (mb_model*)&failures; /* must be reset to NULL by a failing load */
  mb_load_options options = mb_load_options_default();
  char missing[1024];
  printf("version and load errors\n");
  CHECK(strcmp(mb_version(), MAMBACPP_VERSION_STRING) == 0);
  CHECK(strcmp(mb_status_name(MB_ERR_IO), "MB_ERR_IO") == 0);
  CHECK(strcmp(mb_status_name((mb_status)99), "unknown status") == 0);

  work_path(missing, sizeof missing, "no-such-model");
  EXPECT_STATUS(mb_model_load(missing, NULL, &model), MB_ERR_IO);
  CHECK(model == NULL);
  CHECK(strstr(mb_last_error(), "no-such-model") != NULL);
  EXPECT_STATUS(mb_model_load(NULL, NULL, &model), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_model_load(model_dir, NULL, NULL), MB_ERR_INVALID_ARGUMENT);
  options.dtype = "f99";
  EXPECT_STATUS(mb_model_load(model_dir, &options, &model), MB_ERR_INVALID_ARGUMENT);
  options = mb_load_options_default();
  options.device = "tpu";
  EXPECT_STATUS(mb_model_load(model_dir, &options, &model), MB_ERR_INVALID_ARGUMENT);
  options = mb_load_options_default();
  options.device = "vulkan:99"; /* no such device, whether or not the build has Vulkan */
  EXPECT_STATUS(mb_model_load(model_dir, &options, &model), MB_ERR_UNSUPPORTED);
  options = mb_load_options_default();
  options.n_threads = -1;
  EXPECT_STATUS(mb_model_load(model_dir, &options, &model), MB_ERR_INVALID_ARGUMENT);
  CHECK(model == NULL);
}

/* Logits of a fresh state over `tokens` equal the CLI's `logits --all-positions`, bit for bit. */
static void test_logits_match_cli(mb_model* model, const char* model_dir) {
  static const int32_t tokens[] = {5, 17, 42, 100, 7};
  char npy[1024], command[8192];
  size_t count = 0;
  float* reference;
  mb_state* state = NULL;
  mb_sequence_input input = {0};
  mb_output output;
  printf("logits against the CLI\n");
  work_path(npy, sizeof npy, "reference.npy");
  snprintf(command, sizeof command, "%s logits -m %s --tokens 5,17,42,100,7 --all-positions --out %s", cli,
           model_dir, npy);
  run_command(command);
  reference = read_npy(npy, "(5, 301)", &count);
  CHECK(reference != NULL && count == 5 * VOCAB);

  EXPECT_OK(mb_state_new(model, &state));
  input.state = state;
  input.tokens = tokens;
  input.n_tokens = 5;
  EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_ALL, &output));
  CHECK(output.rows == 5 && output.width == VOCAB);
  CHECK(reference != NULL && count == 5 * VOCAB &&
        memcmp(output.data, reference, count * sizeof(float)) == 0);
  mb_output_free(&output);
  CHECK(output.data == NULL && output.rows == 0);
  free(reference);
  mb_state_free(state);
}

/* Three sequences of different lengths in one batch equal each alone, outputs and states. */
static void test_batch_equals_alone(mb_model* model) {
  static const int32_t a[] = {1, 2, 3}, b[] = {250}, c[] = {9, 8, 7, 6, 5, 4};
  const int32_t* tokens[3] = {a, b, c};
  const size_t lengths[3] = {3, 1, 6};
  const mb_output_kind kinds[] = {MB_OUTPUT_LOGITS_ALL, MB_OUTPUT_HIDDEN_ALL, MB_OUTPUT_HIDDEN_MEAN,
                                  MB_OUTPUT_LOGITS_LAST};
  size_t k, i;
  printf("batch against each sequence alone\n");
  for (k = 0; k < sizeof kinds / sizeof kinds[0]; ++k) {
    mb_state *batched[3], *alone[3];
    mb_sequence_input batch[3];
    mb_output out_batch[3], out_alone[3];
    for (i = 0; i < 3; ++i) {
      EXPECT_OK(mb_state_new(model, &batched[i]));
      EXPECT_OK(mb_state_new(model, &alone[i]));
      batch[i].state = batched[i];
      batch[i].tokens = tokens[i];
      batch[i].n_tokens = lengths[i];
      batch[i].features = NULL;
      batch[i].n_features = 0;
    }
    EXPECT_OK(mb_forward(model, batch, 3, kinds[k], out_batch));
    for (i = 0; i < 3; ++i) {
      mb_sequence_input one = batch[i];
      int64_t position = -1;
      one.state = alone[i];
      EXPECT_OK(mb_forward(model, &one, 1, kinds[k], &out_alone[i]));
      CHECK(same_output(&out_batch[i], &out_alone[i]));
      CHECK(out_batch[i].width ==
            (kinds[k] == MB_OUTPUT_LOGITS_ALL || kinds[k] == MB_OUTPUT_LOGITS_LAST ? VOCAB : D_MODEL));
      CHECK(same_state(batched[i], alone[i]));
      EXPECT_OK(mb_state_position(batched[i], &position));
      CHECK(position == (int64_t)lengths[i]);
      mb_output_free(&out_batch[i]);
      mb_output_free(&out_alone[i]);
      mb_state_free(batched[i]);
      mb_state_free(alone[i]);
    }
  }
}

/* The greedy id of a LOGITS_LAST row, ties to the lowest id, in a plain loop. */
static int32_t argmax(const float* row, int64_t width) {
  int64_t best = 0, i;
  for (i = 1; i < width; ++i)
    if (row[i] > row[best]) best = i;
  return (int32_t)best;
}

static void test_argmax_copy_and_files(mb_model* model) {
  static const int32_t prompt[] = {3, 1, 4, 1, 5};
  static const int32_t next = 9;
  mb_state *state = NULL, *copy = NULL, *loaded = NULL;
  mb_sequence_input input = {0};
  mb_output logits, greedy, from_copy, from_loaded;
  char path[1024], bad[1024], command[8192];
  printf("argmax, copies and state files\n");
  EXPECT_OK(mb_state_new(model, &state));
  input.state = state;
  input.tokens = prompt;
  input.n_tokens = 5;
  EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, &logits));
  EXPECT_OK(mb_state_copy(state, &copy));
  work_path(path, sizeof path, "prompt.state");
  EXPECT_OK(mb_state_save(state, path));
  EXPECT_OK(mb_state_load(model, path, &loaded));
  CHECK(same_state(state, loaded));

  /* The argmax of the state and of its copy, one more token in: the copy is a true fork. */
  input.tokens = &next;
  input.n_tokens = 1;
  EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_ARGMAX_LAST, &greedy));
  input.state = copy;
  EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, &from_copy));
  input.state = loaded;
  EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, &from_loaded));
  CHECK(greedy.rows == 1 && greedy.width == 1);
  CHECK(same_output(&from_copy, &from_loaded));
  CHECK(from_copy.rows == 1 && greedy.data[0] == (float)argmax(from_copy.data, from_copy.width));
  CHECK(logits.rows == 1 && !same_output(&logits, &from_copy));
  CHECK(same_state(state, copy) && same_state(copy, loaded));

  mb_state_free(loaded);
  work_path(bad, sizeof bad, "no-such-dir/x.state");
  EXPECT_STATUS(mb_state_save(state, bad), MB_ERR_IO);
  EXPECT_STATUS(mb_state_load(model, bad, &loaded), MB_ERR_IO);
  CHECK(loaded == NULL);
  work_path(bad, sizeof bad, "garbage.state");
  snprintf(command, sizeof command, "echo garbage > %s", bad);
  run_command(command);
  EXPECT_STATUS(mb_state_load(model, bad, &loaded), MB_ERR_IO);
  mb_output_free(&logits);
  mb_output_free(&greedy);
  mb_output_free(&from_copy);
  mb_output_free(&from_loaded);
  mb_state_free(state);
  mb_state_free(copy);
}

static void test_forward_errors(mb_model* model, mb_model* other) {
  static const int32_t bad_token[] = {1, VOCAB};
  static const int32_t good[] = {1};
  static const float features[4] = {0};
  mb_state *state = NULL, *foreign = NULL, *none = NULL;
  mb_sequence_input input = {0}, twice[2];
  mb_output output[2];
  size_t count = 1;
  float one;
  int64_t position = -1;
  printf("forward errors\n");
  EXPECT_OK(mb_state_new(model, &state));
  EXPECT_OK(mb_state_new(other, &foreign));
  input.state = state;
  input.tokens = bad_token;
  input.n_tokens = 2;
  EXPECT_STATUS(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mb_last_error(), "301") != NULL);
  CHECK(output[0].data == NULL);
  EXPECT_OK(mb_state_position(state, &position));
  CHECK(position == 0);
  input.tokens = good;
  input.n_tokens = 1;
  EXPECT_STATUS(mb_forward(model, &input, 1, (mb_output_kind)99, output), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_forward(NULL, &input, 1, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_forward(model, NULL, 1, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, NULL), MB_ERR_INVALID_ARGUMENT);
  twice[0] = input;
  twice[1] = input;
  EXPECT_STATUS(mb_forward(model, twice, 2, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  twice[1].state = NULL;
  EXPECT_STATUS(mb_forward(model, twice, 2, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  twice[1].state = foreign;
  EXPECT_STATUS(mb_forward(model, twice, 2, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  input.tokens = NULL;
  EXPECT_STATUS(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  input.n_tokens = 0;
  input.features = features;
  input.n_features = 4;
  EXPECT_STATUS(mb_forward(model, &input, 1, MB_OUTPUT_LOGITS_LAST, output), MB_ERR_INVALID_ARGUMENT);
  EXPECT_OK(mb_state_position(state, &position));
  CHECK(position == 0);

  EXPECT_STATUS(mb_state_read(state, &one, &count), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_state_read(state, NULL, NULL), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_state_position(NULL, &position), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_state_copy(NULL, &none), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_state_new(NULL, &none), MB_ERR_INVALID_ARGUMENT);
  CHECK(none == NULL);
  EXPECT_STATUS(mb_state_save(NULL, "x"), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_model_get_info(NULL, NULL), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_model_set_threads(model, 5000), MB_ERR_INVALID_ARGUMENT);
  mb_state_free(state);
  mb_state_free(foreign);
  mb_state_free(NULL);
  mb_model_free(NULL);
  mb_output_free(NULL);
  mb_generate_result_free(NULL);
}

/* A model with an input projection takes feature rows; a batch equals each alone there too. */
static void test_features(void) {
  enum { T0 = 3, T1 = 2, WIDTH = 4 };
  float rows0[T0 * WIDTH], rows1[T1 * WIDTH];
  char dir[1024];
  mb_model* model = NULL;
  mb_model_info info;
  mb_state *s[2], *alone = NULL;
  mb_sequence_input batch[2] = {{0}, {0}};
  mb_output out[2], single;
  int i;
  printf("feature inputs\n");
  for (i = 0; i < T0 * WIDTH; ++i) rows0[i] = (float)sin(0.7 * i);
  for (i = 0; i < T1 * WIDTH; ++i) rows1[i] = (float)cos(1.3 * i);
  make_model("features", "--input-dim 4");
  work_path(dir, sizeof dir, "features");
  EXPECT_OK(mb_model_load(dir, NULL, &model));
  EXPECT_OK(mb_model_get_info(model, &info));
  CHECK(info.input_dim == WIDTH);
  EXPECT_OK(mb_state_new(model, &s[0]));
  EXPECT_OK(mb_state_new(model, &s[1]));
  EXPECT_OK(mb_state_new(model, &alone));
  batch[0].state = s[0];
  batch[0].features = rows0;
  batch[0].n_features = T0 * WIDTH;
  batch[1].state = s[1];
  batch[1].features = rows1;
  batch[1].n_features = T1 * WIDTH;
  EXPECT_OK(mb_forward(model, batch, 2, MB_OUTPUT_HIDDEN_ALL, out));
  batch[1].state = alone;
  EXPECT_OK(mb_forward(model, &batch[1], 1, MB_OUTPUT_HIDDEN_ALL, &single));
  CHECK(out[0].rows == T0 && out[1].rows == T1 && out[1].width == D_MODEL);
  CHECK(same_output(&out[1], &single));
  CHECK(same_state(s[1], alone));
  mb_output_free(&single);
  batch[0].n_features = 5; /* not a whole number of rows */
  EXPECT_STATUS(mb_forward(model, batch, 1, MB_OUTPUT_HIDDEN_ALL, &single), MB_ERR_INVALID_ARGUMENT);
  {
    const int32_t id = 1;
    const mb_token_span span = {&id, 1};
    EXPECT_STATUS(mb_embed(model, &span, 1, MB_POOLING_MEAN, 1, &single), MB_ERR_UNSUPPORTED);
  }
  for (i = 0; i < 2; ++i) {
    mb_output_free(&out[i]);
    mb_state_free(s[i]);
  }
  mb_output_free(&single);
  mb_state_free(alone);
  mb_model_free(model);
}

/* v / its L2 norm, in double, each value rounded to float once: what mb_embed promises. */
static void unit_in_double(const float* v, float* out, int64_t width) {
  double squares = 0;
  int64_t k;
  for (k = 0; k < width; ++k) squares += (double)v[k] * (double)v[k];
  for (k = 0; k < width; ++k) out[k] = (float)((double)v[k] / sqrt(squares));
}

/* mb_embed: a batch equals each sequence alone, both poolings equal the normalised hidden
 * outputs of mb_forward, and bad arguments are refused before anything runs. */
static void test_embed(mb_model* model) {
  const int32_t a[] = {5, 17, 300, 2}, b[] = {42}, c[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int32_t* seqs[3] = {a, b, c};
  const size_t lengths[3] = {4, 1, 9};
  const int32_t bad[] = {1, VOCAB};
  mb_token_span spans[3], empty = {a, 0}, out_of_range = {bad, 2};
  const mb_pooling poolings[2] = {MB_POOLING_MEAN, MB_POOLING_LAST};
  const mb_output_kind kinds[2] = {MB_OUTPUT_HIDDEN_MEAN, MB_OUTPUT_HIDDEN_LAST};
  int p, i;
  printf("embeddings\n");
  for (i = 0; i < 3; ++i) {
    spans[i].tokens = seqs[i];
    spans[i].n_tokens = lengths[i];
  }
  for (p = 0; p < 2; ++p) {
    mb_output batch = {0};
    EXPECT_OK(mb_embed(model, spans, 3, poolings[p], 1, &batch));
    CHECK(batch.rows == 3 && batch.width == D_MODEL && batch.data != NULL);
    if (batch.data == NULL) continue;
    for (i = 0; i < 3; ++i) {
      mb_output alone = {0}, hidden = {0};
      mb_state* state = NULL;
      mb_sequence_input input = {0};
      float expected[D_MODEL];
      double squares = 0;
      int64_t k;
      EXPECT_OK(mb_embed(model, &spans[i], 1, poolings[p], 1, &alone));
      CHECK(alone.rows == 1 && alone.data != NULL &&
            memcmp(alone.data, batch.data + i * D_MODEL, D_MODEL * sizeof(float)) == 0);
      EXPECT_OK(mb_state_new(model, &state));
      input.state = state;
      input.tokens = seqs[i];
      input.n_tokens = lengths[i];
      EXPECT_OK(mb_forward(model, &input, 1, kinds[p], &hidden));
      unit_in_double(hidden.data, expected, D_MODEL);
      CHECK(memcmp(expected, batch.data + i * D_MODEL, sizeof expected) == 0);
      for (k = 0; k < D_MODEL; ++k)
        squares += (double)batch.data[i * D_MODEL + k] * batch.data[i * D_MODEL + k];
      CHECK(fabs(squares - 1.0) < 1e-6);
      mb_output_free(&alone);
      mb_output_free(&hidden);
      mb_state_free(state);
    }
    mb_output_free(&batch);
  }
  {
    mb_output raw = {0}, hidden = {0};
    mb_state* state = NULL;
    mb_sequence_input input = {0};
    EXPECT_OK(mb_embed(model, &spans[0], 1, MB_POOLING_MEAN, 0, &raw));
    EXPECT_OK(mb_state_new(model, &state));
    input.state = state;
    input.tokens = a;
    input.n_tokens = 4;
    EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_HIDDEN_MEAN, &hidden));
    CHECK(same_output(&raw, &hidden)); /* normalize = 0: the pooled vector itself */
    mb_output_free(&raw);
    mb_output_free(&hidden);
    mb_state_free(state);
  }
  {
    mb_output none = {0};
    EXPECT_OK(mb_embed(model, NULL, 0, MB_POOLING_MEAN, 1, &none));
    CHECK(none.data == NULL && none.rows == 0);
    EXPECT_STATUS(mb_embed(model, &empty, 1, MB_POOLING_MEAN, 1, &none), MB_ERR_INVALID_ARGUMENT);
    CHECK(strstr(mb_last_error(), "empty") != NULL && none.data == NULL);
    EXPECT_STATUS(mb_embed(model, &out_of_range, 1, MB_POOLING_MEAN, 1, &none), MB_ERR_INVALID_ARGUMENT);
    CHECK(strstr(mb_last_error(), "301") != NULL);
    EXPECT_STATUS(mb_embed(model, spans, 1, (mb_pooling)7, 1, &none), MB_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(mb_embed(model, spans, 1, MB_POOLING_MEAN, 1, NULL), MB_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(mb_embed(NULL, spans, 1, MB_POOLING_MEAN, 1, &none), MB_ERR_INVALID_ARGUMENT);
  }
}

static void test_tokens(mb_model* model) {
  const char* text = "Hello world, state space models!";
  static const int32_t bad[] = {1, 1000000};
  int32_t* ids = NULL;
  size_t n_ids = 0, length = 0;
  char* back = NULL;
  printf("tokenize and detokenize\n");
  EXPECT_OK(mb_tokenize(model, text, strlen(text), &ids, &n_ids));
  CHECK(n_ids > 0 && n_ids <= strlen(text));
  EXPECT_OK(mb_detokenize(model, ids, n_ids, &back, &length));
  CHECK(back != NULL && length == strlen(text) && strcmp(back, text) == 0);
  mb_free_tokens(ids);
  mb_free_string(back);
  EXPECT_OK(mb_tokenize(model, "", 0, &ids, &n_ids));
  CHECK(n_ids == 0);
  mb_free_tokens(ids);
  EXPECT_STATUS(mb_detokenize(model, bad, 2, &back, &length), MB_ERR_INVALID_ARGUMENT);
  CHECK(back == NULL);
  EXPECT_STATUS(mb_tokenize(model, NULL, 3, &ids, &n_ids), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_tokenize(NULL, "a", 1, &ids, &n_ids), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_detokenize(model, bad, 1, NULL, &length), MB_ERR_INVALID_ARGUMENT);
}

/* What a generate callback saw: the ids, the concatenated text, and when to stop. */
struct stream_log {
  int32_t tokens[64];
  size_t count;
  char text[4096];
  size_t text_len;
  size_t stop_after; /* 0 = never */
  mb_model* model;   /* when set, the callback tries to run the model from inside the call */
  mb_status reentry_status;
};

static int on_token(int32_t token, const char* piece, size_t piece_len, void* user_data) {
  struct stream_log* log = user_data;
  CHECK(strlen(piece) == piece_len);
  if (log->count < 64) log->tokens[log->count] = token;
  ++log->count;
  if (log->text_len + piece_len < sizeof log->text) {
    memcpy(log->text + log->text_len, piece, piece_len);
    log->text_len += piece_len;
    log->text[log->text_len] = '\0';
  }
  if (log->model != NULL) {
    mb_state* state = NULL;
    mb_sequence_input input = {0};
    mb_output output;
    EXPECT_OK(mb_state_new(log->model, &state));
    input.state = state;
    input.tokens = &token;
    input.n_tokens = 1;
    log->reentry_status = mb_forward(log->model, &input, 1, MB_OUTPUT_LOGITS_LAST, &output);
    mb_state_free(state);
  }
  return log->stop_after != 0 && log->count >= log->stop_after;
}

/* Greedy generation equals a loop of ARGMAX_LAST forward steps, and streams what it returns. */
static void test_generate_greedy(mb_model* model) {
  static const int32_t prompt[] = {12, 34, 56};
  enum { N = 8 };
  int32_t expected[N];
  mb_state *loop_state = NULL, *state = NULL;
  mb_sequence_input input = {0};
  mb_generate_params params = mb_generate_params_default();
  mb_generate_result result;
  struct stream_log log;
  int64_t position = 0;
  int i;
  printf("greedy generation\n");
  EXPECT_OK(mb_state_new(model, &loop_state));
  input.state = loop_state;
  input.tokens = prompt;
  input.n_tokens = 3;
  for (i = 0; i < N; ++i) {
    mb_output greedy;
    EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_ARGMAX_LAST, &greedy));
    expected[i] = greedy.data != NULL ? (int32_t)greedy.data[0] : -1;
    mb_output_free(&greedy);
    input.tokens = &expected[i];
    input.n_tokens = 1;
  }

  memset(&log, 0, sizeof log);
  EXPECT_OK(mb_state_new(model, &state));
  params.prompt_tokens = prompt;
  params.n_prompt_tokens = 3;
  params.max_tokens = N;
  params.sampling.temperature = 0.0f;
  params.stop_at_eos = 0;
  params.callback = on_token;
  params.user_data = &log;
  EXPECT_OK(mb_generate(model, state, &params, &result));
  CHECK(result.n_tokens == N && result.stop_reason == MB_STOP_MAX_TOKENS && result.prompt_tokens == 3);
  CHECK(result.n_tokens == N && memcmp(result.tokens, expected, sizeof expected) == 0);
  CHECK(log.count == N && memcmp(log.tokens, expected, sizeof expected) == 0);
  CHECK(result.text != NULL && log.text_len == result.text_len && strcmp(log.text, result.text) == 0);
  /* The state consumed the prompt and every returned token. */
  EXPECT_OK(mb_state_position(state, &position));
  CHECK(position == 3 + N);
  mb_generate_result_free(&result);
  CHECK(result.tokens == NULL && result.text == NULL);

  /* A callback that stops after 3 tokens. */
  memset(&log, 0, sizeof log);
  log.stop_after = 3;
  EXPECT_OK(mb_generate(model, NULL, &params, &result));
  CHECK(result.n_tokens == 3 && result.stop_reason == MB_STOP_CALLBACK && log.count == 3);
  CHECK(result.n_tokens == 3 && memcmp(result.tokens, expected, 3 * sizeof(int32_t)) == 0);
  mb_generate_result_free(&result);

  /* A callback may not run the model it is called from: an error, not a deadlock. */
  memset(&log, 0, sizeof log);
  log.stop_after = 1;
  log.model = model;
  EXPECT_OK(mb_generate(model, NULL, &params, &result));
  CHECK(log.reentry_status == MB_ERR_INVALID_ARGUMENT);
  mb_generate_result_free(&result);
  mb_state_free(state);
  mb_state_free(loop_state);
}

/* Sampled generation from text is reproducible from its seed, continues a state as one run, and
 * refuses bad requests. */
static void test_generate_sampled(mb_model* model, mb_model* other) {
  static const int32_t out_of_range[] = {1, VOCAB};
  mb_generate_params params = mb_generate_params_default();
  mb_generate_result first, second;
  mb_state *state = NULL, *foreign = NULL;
  int64_t position = 0;
  printf("sampled generation\n");
  params.prompt = "The state space model";
  params.max_tokens = 6;
  params.sampling.seed = 7;
  params.stop_at_eos = 0;
  EXPECT_OK(mb_generate(model, NULL, &params, &first));
  EXPECT_OK(mb_generate(model, NULL, &params, &second));
  CHECK(first.n_tokens == 6 && second.n_tokens == 6 && first.prompt_tokens > 0);
  CHECK(first.n_tokens == second.n_tokens && memcmp(first.tokens, second.tokens, 6 * sizeof(int32_t)) == 0);
  CHECK(first.text != NULL && second.text != NULL && strcmp(first.text, second.text) == 0);
  EXPECT_OK(mb_state_new(model, &state));
  mb_generate_result_free(&second);
  EXPECT_OK(mb_generate(model, state, &params, &second));
  EXPECT_OK(mb_state_position(state, &position));
  CHECK(position == first.prompt_tokens + 6);
  mb_generate_result_free(&first);
  mb_generate_result_free(&second);

  params.sampling.top_p = 0.0f;
  EXPECT_STATUS(mb_generate(model, NULL, &params, &first), MB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mb_last_error(), "top_p") != NULL);
  params = mb_generate_params_default();
  EXPECT_STATUS(mb_generate(model, NULL, &params, &first), MB_ERR_INVALID_ARGUMENT); /* no prompt */
  params.prompt_tokens = out_of_range;
  params.n_prompt_tokens = 2;
  EXPECT_STATUS(mb_generate(model, NULL, &params, &first), MB_ERR_INVALID_ARGUMENT);
  params.prompt = "both";
  EXPECT_STATUS(mb_generate(model, NULL, &params, &first), MB_ERR_INVALID_ARGUMENT);
  params.prompt = NULL;
  params.n_prompt_tokens = 1;
  params.max_tokens = -1;
  EXPECT_STATUS(mb_generate(model, NULL, &params, &first), MB_ERR_INVALID_ARGUMENT);
  params.max_tokens = 2;
  EXPECT_OK(mb_state_new(other, &foreign));
  EXPECT_STATUS(mb_generate(model, foreign, &params, &first), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_generate(NULL, NULL, &params, &first), MB_ERR_INVALID_ARGUMENT);
  EXPECT_STATUS(mb_generate(model, NULL, NULL, &first), MB_ERR_INVALID_ARGUMENT);
  CHECK(first.tokens == NULL && first.text == NULL);
  mb_state_free(foreign);
  mb_state_free(state);
}

/* A copy of the model folder without its tokenizer: ids work, text is MB_ERR_UNSUPPORTED. */
static void test_without_tokenizer(const char* model_dir) {
  static const int32_t prompt[] = {1, 2};
  char dir[1024], command[8192];
  mb_model* model = NULL;
  mb_model_info info;
  int32_t* ids = NULL;
  size_t n_ids = 0;
  char* text = NULL;
  mb_generate_params params = mb_generate_params_default();
  mb_generate_result result;
  printf("a model without a tokenizer\n");
  work_path(dir, sizeof dir, "no-tokenizer");
  snprintf(command, sizeof command, "rm -rf %s && cp -r %s %s && rm %s/tokenizer.json", dir, model_dir, dir,
           dir);
  run_command(command);
  EXPECT_OK(mb_model_load(dir, NULL, &model));
  EXPECT_OK(mb_model_get_info(model, &info));
  CHECK(info.has_tokenizer == 0);
  EXPECT_STATUS(mb_tokenize(model, "a", 1, &ids, &n_ids), MB_ERR_UNSUPPORTED);
  EXPECT_STATUS(mb_detokenize(model, prompt, 2, &text, NULL), MB_ERR_UNSUPPORTED);
  params.prompt = "text";
  EXPECT_STATUS(mb_generate(model, NULL, &params, &result), MB_ERR_UNSUPPORTED);
  {
    mb_chat* chat = NULL;
    EXPECT_STATUS(mb_chat_new(model, NULL, &chat), MB_ERR_UNSUPPORTED);
    CHECK(chat == NULL);
  }
  params.prompt = NULL;
  params.prompt_tokens = prompt;
  params.n_prompt_tokens = 2;
  params.max_tokens = 3;
  params.stop_at_eos = 0;
  EXPECT_OK(mb_generate(model, NULL, &params, &result));
  CHECK(result.n_tokens == 3 && result.text != NULL && result.text[0] == '\0');
  mb_generate_result_free(&result);
  mb_model_free(model);
}

/* What a chat's text callback saw, and after which piece it asks to stop (0: never). */
typedef struct chat_stream {
  char text[8192];
  size_t len;
  int pieces, stop_after;
} chat_stream;

static int on_chat_text(const char* text, size_t text_len, void* user_data) {
  chat_stream* s = (chat_stream*)user_data;
  CHECK(strlen(text) == text_len);
  if (s->len + text_len < sizeof s->text) {
    memcpy(s->text + s->len, text, text_len);
    s->len += text_len;
    s->text[s->len] = '\0';
  }
  ++s->pieces;
  return s->stop_after != 0 && s->pieces >= s->stop_after;
}

/* A conversation's second turn resumes from the first (its prompt is not prefilled again) and
 * answers what a fresh conversation given the same messages answers, text for text; a callback
 * ends a reply early; a turn past the context is refused and the conversation goes on. */
static void test_chat(mb_model* model) {
  mb_chat *chat = NULL, *fresh = NULL;
  mb_chat_params params = mb_chat_params_default();
  mb_chat_reply first, second, again, cut;
  chat_stream stream;
  char long_message[2048];
  printf("chat\n");
  CHECK(params.max_tokens == 512 && params.stop_at_eos == 1 && params.system == NULL);
  params.system = "Be brief.";
  params.max_tokens = 6;
  params.stop_at_eos = 0;
  params.sampling.temperature = 0.9f;
  params.sampling.seed = 5;
  EXPECT_OK(mb_chat_new(model, &params, &chat));
  EXPECT_OK(mb_chat_new(model, &params, &fresh));
  if (chat == NULL || fresh == NULL) return;
  memset(&stream, 0, sizeof stream);
  EXPECT_OK(mb_chat_send(chat, "Hello there.", on_chat_text, &stream, &first));
  CHECK(first.completion_tokens == 6 && first.cached_tokens == 0 && first.stop_reason == MB_STOP_MAX_TOKENS);
  CHECK(strcmp(first.text, stream.text) == 0 && first.text_len == stream.len);
  EXPECT_OK(mb_chat_send(chat, "And then?", NULL, NULL, &second));
  CHECK(second.cached_tokens >= first.prompt_tokens && second.cached_tokens < second.prompt_tokens);
  EXPECT_OK(mb_chat_add(fresh, "user", "Hello there."));
  EXPECT_OK(mb_chat_add(fresh, "assistant", first.text));
  EXPECT_OK(mb_chat_send(fresh, "And then?", NULL, NULL, &again));
  CHECK(again.cached_tokens == 0 && again.prompt_tokens == second.prompt_tokens);
  CHECK(strcmp(again.text, second.text) == 0);
  mb_chat_reply_free(&again);

  memset(&stream, 0, sizeof stream);
  stream.stop_after = 2;
  EXPECT_OK(mb_chat_clear(chat));
  EXPECT_OK(mb_chat_send(chat, "Tell me more.", on_chat_text, &stream, &cut));
  CHECK(cut.stop_reason == MB_STOP_CALLBACK && cut.completion_tokens < 6);
  CHECK(strcmp(cut.text, stream.text) == 0);

  mb_chat_free(fresh);
  params.max_context = 40;
  EXPECT_OK(mb_chat_new(model, &params, &fresh));
  memset(long_message, 'x', sizeof long_message - 1);
  long_message[sizeof long_message - 1] = '\0';
  EXPECT_STATUS(mb_chat_send(fresh, long_message, NULL, NULL, &again), MB_ERR_INVALID_ARGUMENT);
  CHECK(again.text == NULL);
  EXPECT_OK(mb_chat_send(fresh, "Hi.", NULL, NULL, &again));
  CHECK(again.prompt_tokens + again.completion_tokens <= 40);
  mb_chat_reply_free(&again);

  /* Text that is not UTF-8 is refused by name and leaves the conversation as it was: the turn
   * after it answers as if it had never been sent. */
  mb_chat_free(chat);
  params.max_context = 0;
  EXPECT_OK(mb_chat_new(model, &params, &chat));
  EXPECT_STATUS(mb_chat_send(chat, "caf\xe9 au lait", NULL, NULL, &again), MB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mb_last_error(), "not valid UTF-8 (byte 0xe9 at offset 3)") != NULL);
  CHECK(again.text == NULL);
  EXPECT_STATUS(mb_chat_add(chat, "user", "\xff"), MB_ERR_INVALID_ARGUMENT);
  CHECK(strstr(mb_last_error(), "UTF-8") != NULL);
  EXPECT_STATUS(mb_chat_add(chat, "us\xc0r", "hi"), MB_ERR_INVALID_ARGUMENT);
  EXPECT_OK(mb_chat_send(chat, "Hello there.", NULL, NULL, &again));
  CHECK(again.text != NULL && strcmp(again.text, first.text) == 0 &&
        again.prompt_tokens == first.prompt_tokens);
  mb_chat_reply_free(&again);
  mb_chat_free(chat);
  chat = NULL;
  params.system = "\xed\xa0\x80"; /* an encoded surrogate */
  EXPECT_STATUS(mb_chat_new(model, &params, &chat), MB_ERR_INVALID_ARGUMENT);
  CHECK(chat == NULL && strstr(mb_last_error(), "the system message is not valid UTF-8") != NULL);
  params.system = "Be brief.";

  params.template_kwargs = "[1]";
  EXPECT_STATUS(mb_chat_new(model, &params, &chat), MB_ERR_INVALID_ARGUMENT);
  CHECK(chat == NULL);
  EXPECT_STATUS(mb_chat_send(NULL, "a", NULL, NULL, &again), MB_ERR_INVALID_ARGUMENT);
  mb_chat_reply_free(&first);
  mb_chat_reply_free(&second);
  mb_chat_reply_free(&cut);
  mb_chat_free(fresh);
}

/* A state keeps its model's weights alive after the model handle is freed. */
static void test_state_outlives_model(mb_model* model) {
  static const int32_t tokens[] = {4, 5};
  mb_state *state = NULL, *copy = NULL;
  mb_sequence_input input = {0};
  mb_output output;
  int64_t position = 0;
  float* values;
  size_t count = 0;
  printf("a state outliving its model\n");
  EXPECT_OK(mb_state_new(model, &state));
  input.state = state;
  input.tokens = tokens;
  input.n_tokens = 2;
  EXPECT_OK(mb_forward(model, &input, 1, MB_OUTPUT_NONE, &output));
  CHECK(output.rows == 0 && output.data == NULL);
  mb_model_free(model);
  EXPECT_OK(mb_state_copy(state, &copy));
  EXPECT_OK(mb_state_position(copy, &position));
  CHECK(position == 2);
  values = state_values(copy, &count);
  CHECK(count > 0 && same_state(state, copy));
  free(values);
  mb_state_free(state);
  mb_state_free(copy);
}

int main(int argc, char** argv) {
  char model_dir[1024];
  mb_model *model = NULL, *other = NULL;
  mb_model_info info;
  mb_load_options options = mb_load_options_default();
  if (argc != 3) {
    fprintf(stderr, "usage: %s CLI WORK_DIR\n", argv[0]);
    return 2;
  }
  cli = argv[1];
  work = argv[2];
  {
    char command[2048];
    snprintf(command, sizeof command, "rm -rf %s && mkdir -p %s", work, work);
    run_command(command);
  }
  make_model("model", "");
  work_path(model_dir, sizeof model_dir, "model");

  test_version_and_load_errors(model_dir);
  options.n_threads = 2;
  EXPECT_OK(mb_model_load(model_dir, &options, &model));
  EXPECT_OK(mb_model_load(model_dir, NULL, &other));
  if (model == NULL || other == NULL) return 1;
  EXPECT_OK(mb_model_get_info(model, &info));
  CHECK(info.vocab_size == VOCAB && info.d_model == D_MODEL && info.n_layer == 2 && info.input_dim == 0 &&
        info.has_tokenizer == 1 && info.n_threads == 2);

  test_logits_match_cli(model, model_dir);
  test_batch_equals_alone(model);
  EXPECT_OK(mb_model_set_threads(model, 1));
  test_batch_equals_alone(model);
  test_argmax_copy_and_files(model);
  test_forward_errors(model, other);
  test_features();
  test_tokens(model);
  test_embed(model);
  test_generate_greedy(model);
  test_generate_sampled(model, other);
  test_chat(model);
  test_without_tokenizer(model_dir);
  test_state_outlives_model(other);

  mb_model_free(model);
  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all C API checks passed\n");
  return 0;
}
