// SPDX-License-Identifier: MIT
/* mambacpp's C API: load a model, run forward passes over batches of sequences, tokenize, and
 * generate text, from C or any language with a C foreign-function interface.
 *
 * Conventions, which hold for every function below:
 *
 * Errors. Every function that can fail returns an mb_status. MB_OK (0) is success; on any other
 * status, mb_last_error() returns a message naming the problem (as the CLI would print it), and
 * the function's outputs are left empty (NULL handles and pointers, zero counts). The message is
 * thread-local: it stays valid, unchanged, until the next call that fails on the same thread.
 * No C++ exception ever leaves the library.
 *
 * Handles. mb_model and mb_state are opaque. A state belongs to the model it was made for and
 * keeps that model's weights alive: freeing the model while states exist is allowed (the weights
 * go when the last state does). Passing a NULL handle where one is required is
 * MB_ERR_INVALID_ARGUMENT; the mb_*_free functions accept NULL and do nothing.
 *
 * Threads. Calls on different models run concurrently. Calls that run the model on one mb_model
 * (mb_forward, mb_generate) are serialized by a lock inside the model, since they share its
 * scratch buffers. A state must not be used by two calls at once.
 *
 * Ownership. Arrays and strings the library returns (token ids, text, outputs) are allocated by
 * the library and released by the matching mb_free_* function; the library never keeps pointers
 * to the caller's buffers after a call returns.
 *
 * Exactness. A sequence's outputs are bit-identical whether it runs alone or in a batch, and
 * whether its positions arrive in one call or one at a time (see the README).
 */
#ifndef MAMBACPP_H
#define MAMBACPP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define MB_API
#else
#define MB_API __attribute__((visibility("default")))
#endif

/* The version of this header; mb_version() returns the library's. */
#define MAMBACPP_VERSION_MAJOR 0
#define MAMBACPP_VERSION_MINOR 1
#define MAMBACPP_VERSION_PATCH 0
#define MAMBACPP_VERSION_STRING "0.1.0"

/* Each enum ends with a *_FORCE_INT value, which no call takes or returns: it makes the enum an
 * int in C and C++ alike, so that any int value passed in (an unknown output kind, say) is
 * refused with MB_ERR_INVALID_ARGUMENT rather than being outside the C++ type's range. */
typedef enum mb_status {
  MB_OK = 0,
  MB_ERR_INVALID_ARGUMENT = 1, /* a NULL or out-of-range argument, a bad token id, a malformed batch */
  MB_ERR_IO = 2,               /* a file could not be read or written, or is not a valid model/state */
  MB_ERR_OUT_OF_MEMORY = 3,
  MB_ERR_UNSUPPORTED = 4, /* the model or build cannot do what was asked (no tokenizer, no device) */
  MB_ERR_INTERNAL = 5,    /* a bug in mambacpp: an internal check failed */
  MB_STATUS_FORCE_INT = 0x7fffffff
} mb_status;

/* "0.1.0": the library's version (may differ from MAMBACPP_VERSION_STRING of a newer header). */
MB_API const char* mb_version(void);
/* The message of the last failed call on this thread ("" when none failed). */
MB_API const char* mb_last_error(void);
/* "MB_OK", "MB_ERR_IO", ...; "unknown status" for other values. */
MB_API const char* mb_status_name(mb_status status);

typedef struct mb_model mb_model;
typedef struct mb_state mb_state;

/* ---- Models ---------------------------------------------------------------------------- */

typedef struct mb_load_options {
  const char* dtype;  /* weight storage: NULL or "auto" (as stored), "f32", "bf16", "f16", "q8_0",
                         "q4_0", "q4_k", "q6_k" */
  const char* device; /* NULL or "cpu", "vulkan", "vulkan:N" */
  int32_t n_threads;  /* threads of forward and generate; 0 = all cores */
} mb_load_options;

/* The defaults: as stored, on the CPU, all cores. */
MB_API mb_load_options mb_load_options_default(void);

/* Loads a Hugging Face checkpoint folder or a .gguf file, and its tokenizer when it has one
 * (tokenizer.json, vocab.json + merges.txt, or GGUF metadata). `options` may be NULL (the
 * defaults). On success *out is a model to release with mb_model_free. */
MB_API mb_status mb_model_load(const char* path, const mb_load_options* options, mb_model** out);
MB_API void mb_model_free(mb_model* model);

typedef struct mb_model_info {
  int64_t vocab_size; /* width of a logits row; token ids are in [0, vocab_size) */
  int64_t d_model;    /* width of a hidden row */
  int64_t n_layer;
  int64_t input_dim; /* width of a feature row; 0 when the model takes token ids only */
  int32_t has_tokenizer;
  int32_t n_threads;
} mb_model_info;

MB_API mb_status mb_model_get_info(const mb_model* model, mb_model_info* out);
/* Threads of later forward and generate calls; 0 = all cores. Results do not depend on it. */
MB_API mb_status mb_model_set_threads(mb_model* model, int32_t n_threads);

/* ---- States ---------------------------------------------------------------------------- */

/* A sequence's recurrent state at position 0. */
MB_API mb_status mb_state_new(const mb_model* model, mb_state** out);
/* An independent copy (a fork: both continue from the same point). */
MB_API mb_status mb_state_copy(const mb_state* state, mb_state** out);
MB_API void mb_state_free(mb_state* state);
/* Positions the state has consumed. */
MB_API mb_status mb_state_position(const mb_state* state, int64_t* out);
/* The state's values (its host form, as a state file stores them): with `values` NULL, *count
 * receives the number of floats; otherwise `*count` must be at least that number on entry, and
 * receives it on return. */
MB_API mb_status mb_state_read(const mb_state* state, float* values, size_t* count);
/* A state file (written atomically) that mb_state_load restores into the same model only. */
MB_API mb_status mb_state_save(const mb_state* state, const char* path);
MB_API mb_status mb_state_load(const mb_model* model, const char* path, mb_state** out);

/* ---- Forward passes -------------------------------------------------------------------- */

typedef enum mb_output_kind {
  MB_OUTPUT_NONE = 0,        /* only advance the state: 0 rows */
  MB_OUTPUT_LOGITS_LAST = 1, /* [1, vocab_size] at the last new position */
  MB_OUTPUT_LOGITS_ALL = 2,  /* [T, vocab_size] */
  MB_OUTPUT_HIDDEN_LAST = 3, /* [1, d_model] after the final norm */
  MB_OUTPUT_HIDDEN_ALL = 4,  /* [T, d_model] */
  MB_OUTPUT_HIDDEN_MEAN = 5, /* [1, d_model]: the final norm's output averaged over the new positions */
  MB_OUTPUT_ARGMAX_LAST = 6, /* [1, 1]: the greedy token id of the last position, as a float */
  MB_OUTPUT_KIND_FORCE_INT = 0x7fffffff
} mb_output_kind;

/* One sequence of a batch: its state and its new positions, as token ids or, for a model with an
 * input projection (input_dim > 0), as n_features = T * input_dim floats, row-major. */
typedef struct mb_sequence_input {
  mb_state* state;
  const int32_t* tokens;
  size_t n_tokens;
  const float* features;
  size_t n_features;
} mb_sequence_input;

/* One sequence's output: rows x width floats, row-major, owned by the library. */
typedef struct mb_output {
  float* data;
  int64_t rows;
  int64_t width;
} mb_output;

/* Runs every sequence's new positions in one batched pass and advances their states. `outputs`
 * is the caller's array of n_batch entries; entry i receives sequence i's rows, to be released
 * with mb_output_free. Each state may appear once in a batch, and all belong to `model`. A bad
 * batch (an out-of-range token id, a wrong feature count, a repeated state) fails before any
 * state changes. */
MB_API mb_status mb_forward(mb_model* model, const mb_sequence_input* batch, size_t n_batch,
                            mb_output_kind kind, mb_output* outputs);
MB_API void mb_output_free(mb_output* output);

/* ---- Embeddings ------------------------------------------------------------------------ */

typedef enum mb_pooling {
  MB_POOLING_MEAN = 0, /* the final norm's output averaged over every position (summed in double) */
  MB_POOLING_LAST = 1, /* the final norm's output at the last position */
  MB_POOLING_FORCE_INT = 0x7fffffff
} mb_pooling;

/* One token sequence to embed. */
typedef struct mb_token_span {
  const int32_t* tokens;
  size_t n_tokens; /* at least 1 */
} mb_token_span;

/* Embeddings of n_inputs token sequences, each from a fresh state, computed in batched passes
 * (rounds of at most 4096 positions): the final hidden state pooled by `pooling` and, when
 * `normalize` is nonzero, L2-normalised (in double, rounded to float once). `output` receives
 * n_inputs rows of d_model floats (release with mb_output_free); each row is bit-identical to
 * its sequence embedded alone, and to what `mambacpp serve`'s /v1/embeddings and the Python
 * package's Model.embed return. An empty sequence or a bad token id is MB_ERR_INVALID_ARGUMENT
 * before anything runs; a model that reads feature rows is MB_ERR_UNSUPPORTED. */
MB_API mb_status mb_embed(mb_model* model, const mb_token_span* inputs, size_t n_inputs, mb_pooling pooling,
                          int normalize, mb_output* output);

/* ---- Tokens and text ------------------------------------------------------------------- */

/* Token ids of `text` (text_len bytes; need not be NUL-terminated), as Hugging Face's tokenizer
 * gives them, without BOS/EOS. *ids (released with mb_free_tokens) may be NULL when *n_ids is 0.
 * MB_ERR_UNSUPPORTED for a model without a tokenizer. */
MB_API mb_status mb_tokenize(const mb_model* model, const char* text, size_t text_len, int32_t** ids,
                             size_t* n_ids);
/* The text of `ids`: a NUL-terminated string (released with mb_free_string) of *text_len bytes
 * (text_len may be NULL). */
MB_API mb_status mb_detokenize(const mb_model* model, const int32_t* ids, size_t n_ids, char** text,
                               size_t* text_len);
MB_API void mb_free_tokens(int32_t* ids);
MB_API void mb_free_string(char* text);

/* ---- Generation ------------------------------------------------------------------------ */

typedef struct mb_sampling {
  float temperature;     /* 0 = greedy */
  int32_t top_k;         /* 0 = off */
  float top_p;           /* 1 = off */
  float min_p;           /* 0 = off */
  float repeat_penalty;  /* 1 = off */
  int32_t repeat_last_n; /* -1 = the whole history */
  uint64_t seed;
} mb_sampling;

/* The CLI's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty, seed 0. */
MB_API mb_sampling mb_sampling_default(void);

/* Called once per generated token with its id and the text that became final with it (`piece`,
 * piece_len bytes, NUL-terminated, possibly empty; valid during the call only). Return nonzero to
 * stop generation after this token. */
typedef int (*mb_token_callback)(int32_t token, const char* piece, size_t piece_len, void* user_data);

typedef enum mb_stop_reason { MB_STOP_MAX_TOKENS = 0, MB_STOP_EOS = 1, MB_STOP_CALLBACK = 2 } mb_stop_reason;

typedef struct mb_generate_params {
  const char* prompt; /* text (needs a tokenizer), or NULL to use prompt_tokens */
  const int32_t* prompt_tokens;
  size_t n_prompt_tokens; /* at least one token, from the text or the ids */
  int32_t max_tokens;     /* >= 0 */
  mb_sampling sampling;
  int32_t stop_at_eos;        /* nonzero: an end-of-text token ends generation (it is not returned) */
  mb_token_callback callback; /* may be NULL */
  void* user_data;
} mb_generate_params;

/* No prompt, 16 tokens, mb_sampling_default(), stop at EOS, no callback. */
MB_API mb_generate_params mb_generate_params_default(void);

typedef struct mb_generate_result {
  int32_t* tokens; /* generated ids */
  size_t n_tokens;
  char* text; /* their text, NUL-terminated ("" without a tokenizer) */
  size_t text_len;
  int64_t prompt_tokens;
  mb_stop_reason stop_reason;
} mb_generate_result;

/* Generates from the prompt, continuing `state` (NULL: a fresh state, dropped afterwards). After
 * the call the state has consumed the prompt and every returned token, so a later call continues
 * exactly as one uninterrupted run. A callback that stops generation is a success
 * (stop_reason MB_STOP_CALLBACK). Release the result with mb_generate_result_free. */
MB_API mb_status mb_generate(mb_model* model, mb_state* state, const mb_generate_params* params,
                             mb_generate_result* result);
MB_API void mb_generate_result_free(mb_generate_result* result);

/* ---- Chat ------------------------------------------------------------------------------ */

/* A conversation held by the library. Its messages are rendered with the checkpoint's chat
 * template (the plain "role: content" lines when it has none) and tokenized as `mambacpp serve`
 * renders a /v1/chat/completions request, and each turn resumes from the state the previous one
 * left, so it prefills only its new text; a reply equals, bit for bit, what a fresh conversation
 * given the same messages answers. It needs a model with a tokenizer, runs with the model's
 * thread count at mb_chat_new, and keeps the model's weights alive until mb_chat_free. */
typedef struct mb_chat mb_chat;

typedef struct mb_chat_params {
  const char* system;          /* a system message first, or NULL */
  int32_t max_tokens;          /* per reply, >= 0 */
  int64_t max_context;         /* tokens a turn may hold, prompt and reply; 0 = no limit */
  mb_sampling sampling;        /* its seed samples every turn */
  int32_t stop_at_eos;         /* nonzero: an end-of-text token ends a reply */
  const char* template_kwargs; /* template variables as a JSON object's text, or NULL */
} mb_chat_params;

/* No system message, 512 tokens per reply, no context limit, mb_sampling_default(), stop at EOS,
 * no template variables. */
MB_API mb_chat_params mb_chat_params_default(void);

/* MB_ERR_UNSUPPORTED when the model has no tokenizer or its chat template cannot be parsed;
 * MB_ERR_INVALID_ARGUMENT when the system message is not valid UTF-8. */
MB_API mb_status mb_chat_new(mb_model* model, const mb_chat_params* params, mb_chat** out);
MB_API void mb_chat_free(mb_chat* chat);

/* Called with each piece of a reply's text as it becomes final (text_len bytes, NUL-terminated,
 * valid during the call only). Return nonzero to end the reply there; what was given stays in
 * the conversation, and text held back until then (an incomplete character) may follow in one
 * last call. */
typedef int (*mb_text_callback)(const char* text, size_t text_len, void* user_data);

typedef struct mb_chat_reply {
  char* text; /* the reply, NUL-terminated, as it went into the conversation */
  size_t text_len;
  int64_t prompt_tokens;     /* the rendered conversation */
  int64_t cached_tokens;     /* of those, resumed from the previous turns instead of prefilled */
  int64_t completion_tokens; /* the reply's tokens */
  mb_stop_reason stop_reason;
} mb_chat_reply;

/* Adds the user's message and writes the assistant's reply (callback may be NULL). When the
 * message is not valid UTF-8 (refused, never repaired; the error names the byte and its offset),
 * the template cannot render the conversation or its prompt leaves no room under max_context,
 * returns MB_ERR_INVALID_ARGUMENT with the conversation unchanged. Release the reply with
 * mb_chat_reply_free. */
MB_API mb_status mb_chat_send(mb_chat* chat, const char* message, mb_text_callback callback, void* user_data,
                              mb_chat_reply* reply);
MB_API void mb_chat_reply_free(mb_chat_reply* reply);
/* Appends a message without answering it, to continue a conversation kept elsewhere (its user
 * and assistant messages in order); the next mb_chat_send answers as if they had been sent.
 * MB_ERR_INVALID_ARGUMENT, adding nothing, when the role or content is not valid UTF-8. */
MB_API mb_status mb_chat_add(mb_chat* chat, const char* role, const char* content);
/* Starts the conversation over with only the system message. */
MB_API mb_status mb_chat_clear(mb_chat* chat);

#ifdef __cplusplus
}
#endif

#endif /* MAMBACPP_H */
